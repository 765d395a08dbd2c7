// Package imagestest finds, for a test, the images `make images`
// (scripts/images.sh, tools/images) built from images/images.json: each
// image's ref and its docker-archive tarball in .cache/images/, ready for
// `ctr -n k8s.io images import`.
//
// Invariant: a ref is jr2.dev/NAME:TAG, TAG the first 12 hex digits of the
// image's config digest: the same inputs give the same ref, a changed image
// another, and never :latest (whose default pull policy is Always; there is
// no registry). A missing or stale image fails the test naming `make
// images`; it is skipped, loudly, only as Find says, and never under
// JR2_REQUIRE_ALL=1.
package imagestest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"jr2.dev/boundary/images"
)

// Build is the command that builds the images.
const Build = "make images"

// Image is one built image.
type Image struct {
	Name string
	// Ref is the name the tarball carries, and the one a Pod gives.
	Ref string
	// Tar is the tarball's absolute path.
	Tar string
}

// Find returns the built images named (every described image when none
// is), by name, or ends the test:
//
//	imgs := imagestest.Find(t)                     // every described image
//	imgs := imagestest.Find(t, "custodian-serve", "agent", "pause")
//	n := nodetest.Start(t, nodetest.Options{Images: imagestest.Tars(imgs), Pause: imgs["pause"].Ref})
//	// a Pod's container: image imgs["agent"].Ref, imagePullPolicy Never
//
// Find fails, naming `make images`, when the index or a tarball is missing
// or the index was built from another images/images.json. Only
// JR2_KUBE_TESTS=skip turns a missing image into a loud skip, as for the
// API server (internal/testkit/kubetest), and never under JR2_REQUIRE_ALL=1.
// An image the builder omitted on purpose (custodian-envoy without an
// Envoy, under JR2_E2E_HOST=serve) is skipped loudly when asked for, unless
// JR2_REQUIRE_ALL=1.
func Find(t testing.TB, names ...string) map[string]Image {
	t.Helper()
	m, omitted, err := find(names)
	if err != nil {
		if os.Getenv("JR2_KUBE_TESTS") == "skip" && os.Getenv("JR2_REQUIRE_ALL") != "1" {
			t.Skipf("NOT RUN without the images: %v (JR2_KUBE_TESTS=skip says so on purpose)", err)
		}
		t.Fatalf("%v; or set JR2_KUBE_TESTS=skip to skip the tests that run them", err)
	}
	if omitted != "" {
		if os.Getenv("JR2_REQUIRE_ALL") == "1" {
			t.Fatalf("%s; JR2_REQUIRE_ALL=1 needs every image: run %s with every tool", omitted, Build)
		}
		t.Skipf("NOT RUN: %s", omitted)
	}
	return m
}

// Lookup is Find for a caller that is not a test (a runner of the node by
// hand): an image missing, or omitted by the builder, is an error naming
// the fix.
func Lookup(names ...string) (map[string]Image, error) {
	m, omitted, err := find(names)
	if err == nil && omitted != "" {
		err = fmt.Errorf("%s; run %s with every tool", omitted, Build)
	}
	return m, err
}

// Tars are the images' tarballs, sorted.
func Tars(m map[string]Image) []string {
	var out []string
	for _, i := range m {
		out = append(out, i.Tar)
	}
	sort.Strings(out)
	return out
}

// Index reads the built index and the description under the repository
// root, checking that one was built from the other: for the tests of the
// images themselves.
func Index() (*images.Index, *images.Description, string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, nil, "", err
	}
	d, err := images.Load(root)
	if err != nil {
		return nil, nil, "", err
	}
	dir := images.CacheDir(root)
	ix, err := images.ReadIndex(dir)
	if os.IsNotExist(err) {
		return nil, nil, "", fmt.Errorf("no images: %s has no %s; run `%s` (it builds every image images/images.json describes; a minute or two the first time)", dir, images.IndexFile, Build)
	}
	if err != nil {
		return nil, nil, "", err
	}
	want, err := images.DescriptionHash(root)
	if err != nil {
		return nil, nil, "", err
	}
	if ix.Description != want {
		return nil, nil, "", fmt.Errorf("the images in %s were built from another images/images.json; run `%s`", dir, Build)
	}
	return ix, d, root, nil
}

func find(names []string) (map[string]Image, string, error) {
	ix, d, root, err := Index()
	if err != nil {
		return nil, "", err
	}
	if len(names) == 0 {
		for _, img := range d.Images {
			names = append(names, img.Name)
		}
	}
	dir := images.CacheDir(root)
	m := map[string]Image{}
	for _, n := range names {
		if d.Image(n) == nil {
			return nil, "", fmt.Errorf("no image %q is described in images/images.json", n)
		}
		if why := ix.Omitted[n]; why != "" {
			return nil, fmt.Sprintf("image %s was not built: %s", n, why), nil
		}
		b, ok := ix.Images[n]
		if !ok {
			return nil, "", fmt.Errorf("image %s is not in %s; run `%s`", n, filepath.Join(dir, images.IndexFile), Build)
		}
		tar := filepath.Join(dir, b.Tar)
		if _, err := os.Stat(tar); err != nil {
			return nil, "", fmt.Errorf("image %s: no tarball %s; run `%s`", n, tar, Build)
		}
		m[n] = Image{Name: n, Ref: b.Ref, Tar: tar}
	}
	return m, "", nil
}

// repoRoot is the nearest directory upward from the working directory
// (a test's package directory) that holds images/images.json.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "images", images.File)); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no repository root (a directory with images/%s) above %s", images.File, wd)
}
