// Package images is the one description of every image this repository
// makes (images.json, beside the Dockerfiles) and how an image's root is
// put together from it: the Debian packages a base is made of, its users,
// and the files of this repository's builds.
//
// # Invariant
//
// What a user builds with Docker and what the tests' Kubernetes node runs
// are the same description: each Dockerfile's final stage is held to it
// (TestDockerfilesMatchDescription), the rendered objects run what it says
// (controlplane/internal/kube TestRecipesMatchObjects), and every image
// `make images` builds holds exactly its packages, users and sources
// (TestBuiltImages).
//
// # Not covered
//
// Docker's own builds of the Dockerfiles (there is no container engine
// here), the bytes of the upstream base images, and versions that hold
// still: see README.md.
package images

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"jr2.dev/boundary/internal/strictjson"
)

// File is the description's name, beside the Dockerfiles.
const File = "images.json"

// Description is images/images.json: every image, what it is made of, and
// how it runs.
type Description struct {
	// Users are the passwd and group entries an image may hold; each has
	// a group of its own with the same number.
	Users []User `json:"users"`
	// Sources are the files of this machine an image may hold, by name.
	Sources map[string]Source `json:"sources"`
	Images  []Image           `json:"images"`
}

// User is one passwd line and its group.
type User struct {
	Name  string `json:"name"`
	UID   int    `json:"uid"`
	Home  string `json:"home"`
	Shell string `json:"shell"`
}

// Source is one file or tree of this machine. Exactly one of Go, Envoy,
// File and Tree is set.
type Source struct {
	// Go is a main package of this repository, built with -trimpath,
	// static (CGO_ENABLED=0) unless CGO; BuildMode is go build's
	// -buildmode (empty: exe).
	Go        string `json:"go"`
	CGO       bool   `json:"cgo"`
	BuildMode string `json:"buildmode"`
	// Envoy is the core Envoy release the tests run (internal/testkit/envoybin
	// finds it): the binary itself, its symlinks resolved.
	Envoy string `json:"envoy"`
	// File is a regular file, relative to the repository.
	File string `json:"file"`
	// Tree is a directory, relative to the repository, of which only
	// Names (files or whole subdirectories) are taken.
	Tree  string   `json:"tree"`
	Names []string `json:"names"`
}

// Image is one image: a base of Debian packages with the users it names,
// the sources it adds, and its config.
type Image struct {
	Name string `json:"name"`
	// Dockerfile is the recipe (under images/) a user builds with Docker;
	// DockerFrom is its final stage's FROM, the base that stands there for
	// what Debs and Users give here.
	Dockerfile string `json:"dockerfile"`
	DockerFrom string `json:"dockerFrom"`
	// Debs are Debian packages by name; the version is the one apt's lists
	// name when the image is built (recorded in the image's labels).
	Debs  []string `json:"debs"`
	Users []string `json:"users"`
	Files []Placed `json:"files"`
	// User ("uid:gid"), Env, Expose, Entrypoint and Cmd are the image's
	// config, and what its Dockerfile's final stage says.
	User       string   `json:"user"`
	Env        []string `json:"env"`
	Expose     []int    `json:"expose"`
	Entrypoint []string `json:"entrypoint"`
	Cmd        []string `json:"cmd"`
}

// Placed puts a source at an absolute path in an image.
type Placed struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	// InDockerBase: the Dockerfile gets this file from its FROM image (the
	// Envoy image's own envoy), not from a COPY.
	InDockerBase bool `json:"inDockerBase"`
}

// Load reads and checks root/images/images.json.
func Load(root string) (*Description, error) {
	p := filepath.Join(root, "images", File)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse reads a description and checks that it is whole: every name
// unique, every source and user an image names described, every path
// absolute and clean, the user one of the image's users (a bare number
// for an image with none).
func Parse(b []byte) (*Description, error) {
	var d Description
	if err := strictjson.Decode(b, &d, "images.json", "; see images/README.md"); err != nil {
		return nil, err
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("images.json: %w", err)
	}
	return &d, nil
}

var (
	word    = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]*$`)
	goPkg   = regexp.MustCompile(`^\./[A-Za-z0-9_./-]+$`)
	relPath = regexp.MustCompile(`^[A-Za-z0-9_.-][A-Za-z0-9_./+-]*$`)
)

func (d *Description) check() error {
	users := map[string]User{}
	uids := map[int]bool{}
	for i, u := range d.Users {
		at := fmt.Sprintf("users[%d]", i)
		if !word.MatchString(u.Name) || users[u.Name] != (User{}) || uids[u.UID] || u.UID < 0 || u.UID > 65535 {
			return fmt.Errorf("%s: name %q uid %d: want a new lower-case name and a new uid in 0–65535", at, u.Name, u.UID)
		}
		if !absClean(u.Home) || !absClean(u.Shell) {
			return fmt.Errorf("%s: home %q, shell %q: want clean absolute paths", at, u.Home, u.Shell)
		}
		users[u.Name], uids[u.UID] = u, true
	}
	for name, s := range d.Sources {
		at := "sources." + name
		if !word.MatchString(name) {
			return fmt.Errorf("%s: want a lower-case name", at)
		}
		n := 0
		for _, set := range []bool{s.Go != "", s.Envoy != "", s.File != "", s.Tree != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: give exactly one of go, envoy, file and tree", at)
		}
		switch {
		case s.Go != "" && !goPkg.MatchString(s.Go):
			return fmt.Errorf("%s: go %q: want a package path of this repository (./…)", at, s.Go)
		case s.Go == "" && (s.CGO || s.BuildMode != ""):
			return fmt.Errorf("%s: cgo and buildmode are for a go source", at)
		case s.BuildMode != "" && s.BuildMode != "c-shared":
			return fmt.Errorf("%s: buildmode %q: want c-shared or none", at, s.BuildMode)
		case s.BuildMode == "c-shared" && !s.CGO:
			return fmt.Errorf("%s: a c-shared build needs cgo", at)
		case s.File != "" && !relClean(s.File):
			return fmt.Errorf("%s: file %q: want a clean path relative to the repository", at, s.File)
		case s.Tree != "" && (!relClean(s.Tree) || len(s.Names) == 0):
			return fmt.Errorf("%s: tree %q: want a clean relative directory and the names to take from it", at, s.Tree)
		case s.Tree == "" && len(s.Names) > 0:
			return fmt.Errorf("%s: names are for a tree", at)
		}
		for _, nm := range s.Names {
			if !relClean(nm) {
				return fmt.Errorf("%s: name %q: want a clean path inside the tree", at, nm)
			}
		}
	}
	seen := map[string]bool{}
	for i, img := range d.Images {
		at := fmt.Sprintf("images[%d]", i)
		if !word.MatchString(img.Name) || seen[img.Name] {
			return fmt.Errorf("%s: name %q: want a new lower-case name", at, img.Name)
		}
		seen[img.Name] = true
		at = "images." + img.Name
		if img.Dockerfile != img.Name+".Dockerfile" || img.DockerFrom == "" {
			return fmt.Errorf("%s: dockerfile %q, dockerFrom %q: want %s.Dockerfile and its final FROM", at, img.Dockerfile, img.DockerFrom, img.Name)
		}
		debs := map[string]bool{}
		for _, p := range img.Debs {
			if !word.MatchString(p) || debs[p] {
				return fmt.Errorf("%s: deb %q: want a Debian package name, once", at, p)
			}
			debs[p] = true
		}
		ids := map[int]bool{}
		for _, u := range img.Users {
			if _, ok := users[u]; !ok || ids[users[u].UID] {
				return fmt.Errorf("%s: user %q is not one of users, or is named twice", at, u)
			}
			ids[users[u].UID] = true
		}
		if len(img.Users) > 0 && !slices.Contains(img.Users, "root") {
			return fmt.Errorf("%s: an image with users has root among them", at)
		}
		uid, gid, ok := strings.Cut(img.User, ":")
		u, err1 := strconv.Atoi(uid)
		g, err2 := strconv.Atoi(gid)
		if !ok || err1 != nil || err2 != nil || u != g || len(img.Users) > 0 && !ids[u] {
			return fmt.Errorf("%s: user %q: want uid:gid, equal, of one of the image's users", at, img.User)
		}
		paths := map[string]bool{}
		for _, f := range img.Files {
			if !absClean(f.Path) || f.Path == "/" || paths[f.Path] {
				return fmt.Errorf("%s: file %q: want a clean absolute path, once", at, f.Path)
			}
			if _, ok := d.Sources[f.Source]; !ok {
				return fmt.Errorf("%s: file %s: source %q is not one of sources", at, f.Path, f.Source)
			}
			paths[f.Path] = true
		}
		if len(img.Entrypoint) == 0 || !paths[img.Entrypoint[0]] {
			return fmt.Errorf("%s: entrypoint %q: want one of the image's files first", at, img.Entrypoint)
		}
		for _, p := range img.Expose {
			if p < 1 || p > 65535 {
				return fmt.Errorf("%s: expose %d: want a port", at, p)
			}
		}
		for _, e := range img.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return fmt.Errorf("%s: env %q: want NAME=value", at, e)
			}
		}
	}
	return nil
}

// Image is the image named name, or nil.
func (d *Description) Image(name string) *Image {
	for i := range d.Images {
		if d.Images[i].Name == name {
			return &d.Images[i]
		}
	}
	return nil
}

// User is the user named name.
func (d *Description) User(name string) (User, bool) {
	for _, u := range d.Users {
		if u.Name == name {
			return u, true
		}
	}
	return User{}, false
}

// UID is the uid of the image's config user.
func (img *Image) UID() int {
	u, _, _ := strings.Cut(img.User, ":")
	n, _ := strconv.Atoi(u)
	return n
}

// File is the image's file at path p, or nil.
func (img *Image) File(p string) *Placed {
	for i := range img.Files {
		if img.Files[i].Path == p {
			return &img.Files[i]
		}
	}
	return nil
}

func absClean(p string) bool { return strings.HasPrefix(p, "/") && path.Clean(p) == p }

func relClean(p string) bool {
	return relPath.MatchString(p) && path.Clean(p) == p && p != ".." && !strings.HasPrefix(p, "../")
}
