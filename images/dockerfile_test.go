package images_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/images"
)

// recipe is the final stage of a Dockerfile: its base, what the image
// runs, as whom, with what environment, what it exposes, where it copies
// its files and which Debian packages it installs.
type recipe struct {
	from       string
	user       string
	env        []string
	expose     []int
	entrypoint []string
	cmd        []string
	copies     []string // destination paths, without a trailing "/"
	installs   []string // apt-get install's packages
}

// parseRecipe reads a Dockerfile's instructions (comments dropped,
// continuation lines joined) and keeps those of its final stage.
// ENTRYPOINT and CMD must be in exec (JSON) form: a shell form would run
// /bin/sh, which distroless has not.
func parseRecipe(t *testing.T, file string) recipe {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	cont := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || l == "" && cont == "" {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cont+l)
		cont = ""
	}
	var r recipe
	for _, l := range lines {
		op, arg, _ := strings.Cut(l, " ")
		arg = strings.TrimSpace(arg)
		switch op = strings.ToUpper(op); op {
		case "FROM":
			from, _, _ := strings.Cut(arg, " ")
			r = recipe{from: from}
		case "USER":
			r.user = arg
		case "ENV":
			k, v, ok := strings.Cut(arg, "=")
			if !ok || strings.ContainsAny(k, " \t") {
				t.Fatalf("%s: ENV %s: write ENV NAME=value", file, arg)
			}
			r.env = append(r.env, k+"="+v)
		case "EXPOSE":
			for _, p := range strings.Fields(arg) {
				n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				if err != nil {
					t.Fatalf("%s: EXPOSE %s", file, p)
				}
				r.expose = append(r.expose, n)
			}
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(arg), &v); err != nil {
				t.Fatalf("%s: %s %s is not in exec form (distroless has no shell): %v", file, op, arg, err)
			}
			if op == "CMD" {
				r.cmd = v
			} else {
				r.entrypoint = v
			}
		case "COPY":
			f := strings.Fields(arg)
			r.copies = append(r.copies, strings.TrimSuffix(f[len(f)-1], "/"))
		case "RUN":
			for _, cmd := range strings.Split(arg, "&&") {
				_, rest, ok := strings.Cut(cmd, "apt-get install")
				if !ok {
					continue
				}
				for _, w := range strings.Fields(rest) {
					if !strings.HasPrefix(w, "-") {
						r.installs = append(r.installs, w)
					}
				}
			}
		}
	}
	return r
}

// TestDockerfilesMatchDescription: each image's Dockerfile is the image
// images.json describes, as Docker would build it — its final stage's
// FROM is the description's dockerFrom (the base that stands for its Debian
// packages and users), its USER, ENTRYPOINT, CMD, EXPOSE and ENV (less
// PATH, which each base sets) are the image's config, every file it COPYs
// is a file of the image and every file of the image that its base does
// not hold is one it COPYs, and every package it installs with apt-get is
// one of the image's. The objects render writes are held to the same
// description (controlplane/internal/kube TestRecipesMatchObjects).
func TestDockerfilesMatchDescription(t *testing.T) {
	d, err := images.Load("..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.Dockerfile")
	var described []string
	for _, img := range d.Images {
		described = append(described, img.Dockerfile)
		t.Run(img.Name, func(t *testing.T) {
			r := parseRecipe(t, img.Dockerfile)
			if r.from != img.DockerFrom {
				t.Errorf("FROM %s; images.json's dockerFrom %s", r.from, img.DockerFrom)
			}
			if r.user != img.User {
				t.Errorf("USER %q; images.json's user %q", r.user, img.User)
			}
			if !slices.Equal(r.entrypoint, img.Entrypoint) {
				t.Errorf("ENTRYPOINT %q; images.json's entrypoint %q", r.entrypoint, img.Entrypoint)
			}
			if !slices.Equal(r.cmd, img.Cmd) {
				t.Errorf("CMD %q; images.json's cmd %q", r.cmd, img.Cmd)
			}
			if !sameSet(r.expose, img.Expose) {
				t.Errorf("EXPOSE %v; images.json's expose %v", r.expose, img.Expose)
			}
			var env []string
			for _, e := range img.Env {
				if !strings.HasPrefix(e, "PATH=") {
					env = append(env, e)
				}
			}
			if !sameSet(r.env, env) {
				t.Errorf("ENV %q; images.json's env, less PATH, %q", r.env, env)
			}
			var copied []string
			for _, f := range img.Files {
				if !f.InDockerBase {
					copied = append(copied, f.Path)
				}
			}
			if !sameSet(r.copies, copied) {
				t.Errorf("COPY destinations %q; images.json's files not in the Docker base %q", r.copies, copied)
			}
			for _, p := range r.installs {
				if !slices.Contains(img.Debs, p) {
					t.Errorf("apt-get install %s: not one of images.json's debs %q", p, img.Debs)
				}
			}
		})
	}
	sort.Strings(files)
	sort.Strings(described)
	if !slices.Equal(files, described) {
		t.Errorf("Dockerfiles %q; images.json describes %q", files, described)
	}
}

func sameSet[T interface{ ~int | ~string }](a, b []T) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
