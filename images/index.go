package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"jr2.dev/boundary/internal/strictjson"
)

// IndexFile is what the builder (tools/images) writes beside the image
// tarballs in CacheDir: each image's ref and tarball, and what it was made
// of.
const IndexFile = "index.json"

// Index is CacheDir's index.json.
type Index struct {
	// Description is the sha256 (hex) of the images.json the images were
	// built from.
	Description string `json:"description"`
	// Images are the images built, by name.
	Images map[string]Built `json:"images"`
	// Omitted are the described images not built, each with why.
	Omitted map[string]string `json:"omitted"`
	// Debs are the Debian packages used, by name, as apt resolved them.
	Debs map[string]Deb `json:"debs"`
	// Sources are the files (a tree's directory) each source was taken
	// from on this machine.
	Sources map[string]string `json:"sources"`
}

// Built is one image tarball (docker-archive, as `ctr images import` and
// `docker load` read it).
type Built struct {
	// Ref is the name the tarball carries: jr2.dev/NAME:TAG, the tag the
	// first 12 hex digits of the image's config digest, so that a changed
	// image never carries the name of another.
	Ref string `json:"ref"`
	// Tar is the tarball's file name, in CacheDir.
	Tar string `json:"tar"`
	// Config is the config's digest (sha256:…), the image ID.
	Config string `json:"config"`
}

// Deb is one Debian package as apt resolved it.
type Deb struct {
	Version string `json:"version"`
	// File is the .deb in DebsDir.
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// CacheDir is where the images are built, under the repository root.
func CacheDir(root string) string { return filepath.Join(root, ".cache", "images") }

// DebsDir is where the Debian packages are kept, by file name (which
// carries the version), under the repository root.
func DebsDir(root string) string { return filepath.Join(root, ".cache", "debs") }

// Registry is the host part of every ref, the project's own domain. The
// images are imported, never pulled: a Pod that runs them says
// imagePullPolicy Never or IfNotPresent.
const Registry = "jr2.dev"

// Ref is the ref of image name whose config digest is configHex.
func Ref(name, configHex string) string {
	return fmt.Sprintf("%s/%s:%s", Registry, name, configHex[:12])
}

// The labels of each image's config: the Debian packages it holds
// (NAME=VERSION, space-separated) and the sha256 of each source
// (NAME=sha256:HEX).
const (
	LabelDebs    = "dev.jr2.image.debs"
	LabelSources = "dev.jr2.image.sources"
)

// ReadIndex reads dir's index.json.
func ReadIndex(dir string) (*Index, error) {
	b, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	var ix Index
	if err := strictjson.Decode(b, &ix, IndexFile, "; rebuild it with `make images`"); err != nil {
		return nil, err
	}
	return &ix, nil
}

// DescriptionHash is the sha256 (hex) Index.Description holds for the
// images.json under root.
func DescriptionHash(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "images", File))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// FileSHA256 is the sha256 (hex) of the file at p: how the builder hashes
// each input and each .deb, and how the tests compare an image's files
// with their sources.
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
