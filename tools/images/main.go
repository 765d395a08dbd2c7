// Command images builds every image images/images.json describes into
// .cache/images/NAME.tar (docker-archive, as `ctr images import` reads it)
// and writes .cache/images/index.json, with no registry and no container
// engine: each image is an empty image, a layer of Debian packages
// (`apt-get download` of the versions apt's lists name, kept in
// .cache/debs/, their files read with `dpkg-deb --fsys-tarfile`) with the
// image's users, a layer of this repository's builds and this machine's
// files the description names, and the config the description gives,
// put together with go-containerregistry. scripts/images.sh runs it (make
// images). When nothing it reads has changed since the last build (a
// stamp of every input's hash), it writes nothing.
//
// A module of its own so the project's go.mod stays free of
// go-containerregistry.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"jr2.dev/boundary/images"
	"jr2.dev/boundary/internal/testkit/envoybin"
)

func main() {
	root := flag.String("root", "../..", "the repository's root")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: images [--root DIR]\n\nBuilds the images DIR/images/images.json describes into DIR/.cache/images/.")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	d, err := images.Load(root)
	if err != nil {
		return err
	}
	descHash, err := images.DescriptionHash(root)
	if err != nil {
		return err
	}
	out := images.CacheDir(root)
	build := filepath.Join(out, "build")
	if err := os.MkdirAll(build, 0o755); err != nil {
		return err
	}
	// apt's resolution and the builds and hashes of the sources are each
	// about a second when nothing changed: side by side.
	var debs map[string]deb
	var debErr error
	resolved := make(chan struct{})
	go func() {
		defer close(resolved)
		debs, debErr = resolveDebs(d)
	}()
	sources, omitted, err := gatherSources(root, build, d)
	<-resolved
	if err != nil {
		return err
	}
	if debErr != nil {
		return debErr
	}
	want, err := stamp(descHash, debs, sources, d)
	if err != nil {
		return err
	}
	stampFile := filepath.Join(out, ".stamp")
	if fresh(out, stampFile, want, d, omitted) {
		return nil
	}
	var names []string
	for _, img := range d.Images {
		if omitted[img.Name] == "" {
			names = append(names, img.Name)
		}
	}
	fmt.Fprintf(os.Stderr, "images: building %s from Debian packages (apt-get download into .cache/debs/, by the versions apt's lists name) and this repository's builds into .cache/images/: no registry, no container engine\n", strings.Join(names, ", "))
	for img, why := range omitted {
		fmt.Fprintf(os.Stderr, "images: NOT BUILT: %s: %s\n", img, why)
	}
	_ = os.Remove(stampFile)
	debFiles, err := download(images.DebsDir(root), debs)
	if err != nil {
		return err
	}
	ix := &images.Index{Description: descHash, Images: map[string]images.Built{}, Omitted: omitted, Debs: map[string]images.Deb{}, Sources: map[string]string{}}
	for p, deb := range debs {
		ix.Debs[p] = images.Deb{Version: deb.version, File: deb.file, SHA256: deb.sha256}
	}
	for s, src := range sources {
		ix.Sources[s] = src.path
	}
	tmp, err := os.MkdirTemp(out, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, runtime.GOMAXPROCS(0))
	)
	for i := range d.Images {
		img := &d.Images[i]
		if omitted[img.Name] != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			b, err := buildImage(d, img, debs, debFiles, sources, tmp, out)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("image %s: %w", img.Name, err))
				return
			}
			ix.Images[img.Name] = b
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := removeStale(out, ix); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, images.IndexFile), append(b, '\n')); err != nil {
		return err
	}
	return writeFile(stampFile, []byte(want+"\n"))
}

// deb is one package as `apt-get download --print-uris` resolves it.
type deb struct {
	name, version, file, sha256 string
}

// resolveDebs asks apt which version of each package its lists name, and
// the .deb's file name and sha256, without downloading anything.
func resolveDebs(d *images.Description) (map[string]deb, error) {
	var pkgs []string
	for _, img := range d.Images {
		for _, p := range img.Debs {
			if !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	if len(pkgs) == 0 {
		return map[string]deb{}, nil
	}
	sort.Strings(pkgs)
	cmd := exec.Command("apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("apt-get download --print-uris: %v: %s; the images are made of Debian packages: on Debian 12 with apt's lists current (apt-get update; .ci/run runs it)", err, strings.TrimSpace(stderr.String()))
	}
	got := map[string]deb{}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || !strings.HasPrefix(f[3], "SHA256:") {
			return nil, fmt.Errorf("apt-get download --print-uris printed %q; want 'URI' FILE SIZE SHA256:HEX", sc.Text())
		}
		parts := strings.Split(strings.TrimSuffix(f[1], ".deb"), "_")
		if len(parts) != 3 {
			return nil, fmt.Errorf("apt-get download --print-uris: file %q is not NAME_VERSION_ARCH.deb", f[1])
		}
		// An epoch's colon is %3a in the file name.
		got[parts[0]] = deb{name: parts[0], version: strings.ReplaceAll(parts[1], "%3a", ":"), file: f[1], sha256: strings.TrimPrefix(f[3], "SHA256:")}
	}
	for _, p := range pkgs {
		if _, ok := got[p]; !ok {
			return nil, fmt.Errorf("apt-get download --print-uris named no .deb for %s", p)
		}
	}
	return got, nil
}

// download makes sure each .deb is in dir with the sha256 apt's lists
// give, fetching those that are not with `apt-get download NAME=VERSION`,
// and returns each package's file.
func download(dir string, debs map[string]deb) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{}
	var missing []string
	for p, d := range debs {
		f := filepath.Join(dir, d.file)
		files[p] = f
		if sum, err := images.FileSHA256(f); err == nil && sum == d.sha256 {
			continue
		}
		missing = append(missing, p+"="+d.version)
	}
	if len(missing) == 0 {
		return files, nil
	}
	sort.Strings(missing)
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"download", "-q"}
	if os.Geteuid() == 0 {
		// apt drops to its _apt user to download, which cannot write
		// into a directory of root's here; root downloads itself.
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	cmd := exec.Command("apt-get", append(args, missing...)...)
	cmd.Dir = tmp
	if outb, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get download %s: %v: %s; Debian's mirror must be reachable, and apt's lists current (apt-get update)", strings.Join(missing, " "), err, strings.TrimSpace(string(outb)))
	}
	for p, d := range debs {
		src := filepath.Join(tmp, d.file)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if sum, err := images.FileSHA256(src); err != nil || sum != d.sha256 {
			return nil, fmt.Errorf("%s: sha256 %s; apt's lists say %s", d.file, sum, d.sha256)
		}
		if err := os.Rename(src, files[p]); err != nil {
			return nil, err
		}
	}
	for p, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("apt-get download left no %s for %s", filepath.Base(f), p)
		}
	}
	return files, nil
}

// source is one source's file (a tree's directory) and its content hash.
type source struct {
	path, hash string
}

// gatherSources builds every go source into build/ and finds every other
// one. An image whose Envoy is missing is omitted, not failed, only where
// the tests run without Envoy (JR2_E2E_HOST=serve, not JR2_REQUIRE_ALL=1).
func gatherSources(root, build string, d *images.Description) (map[string]source, map[string]string, error) {
	srcs := map[string]source{}
	omitted := map[string]string{}
	names := make([]string, 0, len(d.Sources))
	for n := range d.Sources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := d.Sources[n]
		var p string
		switch {
		case s.Go != "":
			p = filepath.Join(build, n)
			if err := goBuild(root, p, s); err != nil {
				return nil, nil, fmt.Errorf("source %s: %w", n, err)
			}
		case s.Envoy != "":
			if s.Envoy != envoybin.Pinned {
				return nil, nil, fmt.Errorf("source %s: envoy %s; the tests run Envoy %s (internal/testkit/envoybin)", n, s.Envoy, envoybin.Pinned)
			}
			bin, err := envoybin.Find()
			if errors.Is(err, envoybin.ErrNone) && os.Getenv("JR2_E2E_HOST") == "serve" && os.Getenv("JR2_REQUIRE_ALL") != "1" {
				for _, img := range d.Images {
					for _, f := range img.Files {
						if f.Source == n {
							omitted[img.Name] = "no core Envoy " + s.Envoy + ": JR2_E2E_HOST=serve runs the tests without it"
						}
					}
				}
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("source %s: %w; `make envoy` installs it", n, err)
			}
			if p, err = filepath.EvalSymlinks(bin); err != nil {
				return nil, nil, err
			}
		case s.File != "":
			p = filepath.Join(root, s.File)
		case s.Tree != "":
			p = filepath.Join(root, s.Tree)
		}
		h, err := sourceHash(p, s)
		if err != nil {
			return nil, nil, fmt.Errorf("source %s: %w; `make tools` fetches what make test needs", n, err)
		}
		srcs[n] = source{path: p, hash: h}
	}
	return srcs, omitted, nil
}

// goBuild builds a go source as its image needs it: -trimpath, static
// unless cgo. go build writes nothing when the binary is up to date.
func goBuild(root, out string, s images.Source) error {
	args := []string{"build", "-trimpath", "-o", out}
	if s.BuildMode != "" {
		args = append(args, "-buildmode="+s.BuildMode)
	}
	cmd := exec.Command(goCmd(), append(args, s.Go)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{true: "1", false: "0"}[s.CGO])
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

func goCmd() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// sourceHash is a file's sha256, or for a tree the sha256 of each taken
// file's path, mode and sha256.
func sourceHash(p string, s images.Source) (string, error) {
	if s.Tree == "" {
		return images.FileSHA256(p)
	}
	h := sha256.New()
	for _, nm := range s.Names {
		err := filepath.WalkDir(filepath.Join(p, nm), func(f string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			sum, err := images.FileSHA256(f)
			if err != nil {
				return err
			}
			st, err := os.Stat(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %o %s\n", f, st.Mode(), sum)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stamp is the hash of everything an image is made of: this builder
// itself, the description, each .deb apt resolved and each source.
func stamp(descHash string, debs map[string]deb, srcs map[string]source, d *images.Description) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	selfHash, err := images.FileSHA256(self)
	if err != nil {
		return "", err
	}
	var lines []string
	lines = append(lines, "builder "+selfHash, "description "+descHash, "platform "+runtime.GOOS+"/"+runtime.GOARCH)
	for p, d := range debs {
		lines = append(lines, "deb "+p+" "+d.file+" "+d.sha256)
	}
	for n, s := range srcs {
		lines = append(lines, "source "+n+" "+s.path+" "+s.hash)
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:]), nil
}

// fresh: the stamp matches, and the index and every tarball it names are
// there.
func fresh(out, stampFile, want string, d *images.Description, omitted map[string]string) bool {
	b, err := os.ReadFile(stampFile)
	if err != nil || strings.TrimSpace(string(b)) != want {
		return false
	}
	ix, err := images.ReadIndex(out)
	if err != nil {
		return false
	}
	for _, img := range d.Images {
		b, ok := ix.Images[img.Name]
		if omitted[img.Name] != "" {
			if ok || ix.Omitted[img.Name] == "" {
				return false
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(out, b.Tar)); !ok || err != nil {
			return false
		}
	}
	return true
}

// buildImage writes one image's tarball into out and returns its entry in
// the index.
func buildImage(d *images.Description, img *images.Image, debs map[string]deb, debFiles map[string]string, srcs map[string]source, tmp, out string) (images.Built, error) {
	base, err := d.Base(img, debFiles)
	if err != nil {
		return images.Built{}, err
	}
	paths := map[string]string{}
	for n, s := range srcs {
		paths[n] = s.path
	}
	added, err := d.Added(img, paths)
	if err != nil {
		return images.Built{}, err
	}
	var versions, sourceHashes []string
	for _, p := range img.Debs {
		versions = append(versions, p+"="+debs[p].version)
	}
	for _, f := range img.Files {
		sourceHashes = append(sourceHashes, f.Source+"=sha256:"+srcs[f.Source].hash)
	}
	var adds []mutate.Addendum
	for i, l := range []struct {
		root images.Root
		by   string
	}{
		{base, "jr2 images: Debian packages " + strings.Join(versions, " ") + "; users " + strings.Join(img.Users, " ")},
		{added, "jr2 images: " + strings.Join(sourceHashes, " ")},
	} {
		if len(l.root) == 0 {
			continue
		}
		layer, err := writeLayer(l.root, filepath.Join(tmp, fmt.Sprintf("%s-%d.tar.gz", img.Name, i)))
		if err != nil {
			return images.Built{}, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: images.Epoch}, CreatedBy: l.by}})
	}
	cfg := &v1.ConfigFile{
		Created:      v1.Time{Time: images.Epoch},
		OS:           "linux",
		Architecture: runtime.GOARCH,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       img.User,
			Env:        img.Env,
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			Labels: map[string]string{
				"org.opencontainers.image.title": img.Name,
				images.LabelDebs:                 strings.Join(versions, " "),
				images.LabelSources:              strings.Join(sourceHashes, " "),
			},
		},
	}
	if len(img.Expose) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Expose {
			cfg.Config.ExposedPorts[strconv.Itoa(p)+"/tcp"] = struct{}{}
		}
	}
	i, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return images.Built{}, err
	}
	i, err = mutate.Append(i, adds...)
	if err != nil {
		return images.Built{}, err
	}
	cfgName, err := i.ConfigName()
	if err != nil {
		return images.Built{}, err
	}
	ref := images.Ref(img.Name, cfgName.Hex)
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return images.Built{}, err
	}
	tmpTar := filepath.Join(tmp, img.Name+".tar")
	if err := tarball.WriteToFile(tmpTar, tag, i); err != nil {
		return images.Built{}, err
	}
	file := img.Name + ".tar"
	if err := os.Rename(tmpTar, filepath.Join(out, file)); err != nil {
		return images.Built{}, err
	}
	return images.Built{Ref: ref, Tar: file, Config: cfgName.String()}, nil
}

// writeLayer writes r as a gzipped tar at p and opens it as a layer. The
// builder compresses once, at gzip's fastest level: the tarballs are
// imported on this machine, never sent anywhere.
func writeLayer(r images.Root, p string) (v1.Layer, error) {
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		f.Close()
		return nil, err
	}
	bw := bufio.NewWriterSize(zw, 1<<20)
	err = r.WriteTar(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(p)
}

// removeStale removes from out every tarball the index does not name.
func removeStale(out string, ix *images.Index) error {
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, b := range ix.Images {
		keep[b.Tar] = true
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar") && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeFile(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
