package pushkind

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/wire"
)

// The node's caches (JR2_EFFECTOR_REPOS) serve many repositories, and on a
// node shared by several tenants many owners. A push reads one of them at
// most: the cache of its own remote, whose name the push derives from the
// slot's url (CacheName). The worktree's alternates may name that cache
// and nothing else, so a commit the agent writes cannot name another
// repository's object and have the push carry it.

// maxAlternates bounds what is read of a worktree's alternates file.
const maxAlternates = 64 << 10

// cacheSegment reports whether seg may be one segment of a cache's path: a
// name of 1 to 255 bytes from [A-Za-z0-9._-] whose first byte is a letter,
// a digit or '_', so it is never "." or "..", never hidden, never an
// option, and holds no escape. A loop, not a regexp: the Effector's init
// allocates little (TestInitAllocatesLittle), and a package-level regexp
// is compiled at init.
func cacheSegment(seg string) bool {
	if len(seg) == 0 || len(seg) > 255 {
		return false
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
		case (c == '.' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CacheName is the name, beneath JR2_EFFECTOR_REPOS, of the node cache that
// mirrors the remote raw (a slot's url, as wire.ParseRemote accepts it): a
// bare repository
//
//	<host>[:<port>]/<path>.git
//
// where host is the url's host in lower case (an IPv6 address in
// brackets), port is there only when the url writes one, and path is the
// url's path without its leading '/', a trailing '/' or ".git". So
// ssh://git@git.example.com/org/app.git, git@git.example.com:org/app and
// https://git.example.com/org/app name the one cache
// git.example.com/org/app.git: the transport and the ssh user are not part
// of it (a forge serves one repository at one path over both). A url whose
// path has a segment that is not a plain name (empty, ".", "..", "~user",
// a '%' escape, another character) names no cache; its push reads none.
func CacheName(raw string) (string, error) {
	r, err := wire.ParseRemote(raw)
	if err != nil {
		return "", err
	}
	var path string
	if strings.HasPrefix(raw, "ssh://") || strings.HasPrefix(raw, "https://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", err
		}
		path = u.EscapedPath()
	} else {
		_, path, _ = strings.Cut(raw, ":")
	}
	path = strings.TrimPrefix(path, "/")
	path = strings.TrimSuffix(path, "/")
	path = strings.TrimSuffix(path, ".git")
	if path == "" || len(path) > 1024 {
		return "", errors.New("its path names no repository a cache can mirror")
	}
	for _, seg := range strings.Split(path, "/") {
		if !cacheSegment(seg) {
			return "", errors.New("its path has a segment that is not a plain name (A-Z a-z 0-9 . _ -, not beginning with '.' or '-')")
		}
	}
	host := strings.ToLower(r.Host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if r.Port != 0 {
		host += ":" + strconv.Itoa(r.Port)
	}
	return host + "/" + path + ".git", nil
}

// boundCache is the push's cache: the objects directory of the cache
// CacheName names beneath repos, when repos is set, the url names one, and
// it is a directory an os.Root of repos reaches without a link out of it.
// name is the cache's name ("" when the url names none); objects is ""
// when there is no such directory.
func boundCache(repos, rawURL string) (name, objects string) {
	name, err := CacheName(rawURL)
	if err != nil {
		return "", ""
	}
	if repos == "" {
		return name, ""
	}
	rr, err := os.OpenRoot(repos)
	if err != nil {
		return name, ""
	}
	defer rr.Close()
	if st, err := rr.Stat(name + "/objects"); err != nil || !st.IsDir() {
		return name, ""
	}
	return name, filepath.Join(filepath.Clean(repos), filepath.FromSlash(name), "objects")
}

// alternatesRule returns the cache the worktree's alternates reach — ""
// for none, else objects, the push's own cache — or why the start is
// refused: the worktree's .git/objects, its info directory and its
// alternates file must be its own (no link), it holds no http-alternates,
// and each entry of its alternates, read as git reads it (absolute, or
// relative to .git/objects; empty lines and '#' comments skipped), names
// objects exactly. name is the push's cache name ("" when its url names
// none) and objects its objects directory ("" when the Effector holds no
// such cache): both are for the reason.
func alternatesRule(work, name, objects string) (string, string) {
	root, err := os.OpenRoot(work)
	if err != nil {
		return "", "the worktree is not a repository the push reads: it cannot be opened"
	}
	defer root.Close()
	for _, d := range []string{".git/objects", ".git/objects/info"} {
		st, err := root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist) && d == ".git/objects/info":
			return "", ""
		case err != nil:
			return "", fmt.Sprintf("the worktree is not a repository the push reads: its %s cannot be read", d)
		case !st.IsDir():
			return "", fmt.Sprintf("the worktree is not a repository the push reads: its %s is a link or a file; the push reads only an object directory of the worktree's own", d)
		}
	}
	if _, err := root.Lstat(".git/objects/info/http-alternates"); !errors.Is(err, fs.ErrNotExist) {
		return "", "the worktree's .git/objects/info/http-alternates names object sources a push never reads; remove it"
	}
	st, err := root.Lstat(".git/objects/info/alternates")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", ""
	case err != nil || !st.Mode().IsRegular():
		return "", "the worktree's .git/objects/info/alternates is not a file of its own (a link, or unreadable); a push reads it only as a file"
	case st.Size() > maxAlternates:
		return "", fmt.Sprintf("the worktree's .git/objects/info/alternates is over %d KiB; a push reads at most that", maxAlternates>>10)
	}
	f, err := root.Open(".git/objects/info/alternates")
	if err != nil {
		return "", "the worktree's .git/objects/info/alternates cannot be read"
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAlternates+1))
	if err != nil || len(b) > maxAlternates {
		return "", "the worktree's .git/objects/info/alternates cannot be read"
	}
	return alternatesIn(b, filepath.Join(filepath.Clean(work), ".git", "objects"), name, objects)
}

// alternatesIn is alternatesRule over the file's bytes b; own is the
// worktree's .git/objects, from which a relative entry is read.
func alternatesIn(b []byte, own, name, objects string) (string, string) {
	found := ""
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		p := line
		if !filepath.IsAbs(p) {
			p = filepath.Join(own, p)
		}
		if objects != "" && line[0] != '"' && filepath.Clean(p) == objects {
			found = objects
			continue
		}
		return "", refusedAlternate(i+1, name, objects)
	}
	return found, ""
}

// refusedAlternate is the reason of an alternates entry (line n) that is
// not the push's cache. It names no byte of the entry: the agent wrote it.
func refusedAlternate(n int, name, objects string) string {
	const sendRule = "a push sends only objects that are the worktree's own or that the cache of its remote holds"
	switch {
	case name == "":
		return fmt.Sprintf("the worktree's .git/objects/info/alternates line %d names an object directory, and the push's url names no node cache (%s); %s: repack the worktree (git repack -a -d) and remove its alternates file", n, "its path is not plain names", sendRule)
	case objects == "":
		return fmt.Sprintf("the worktree's .git/objects/info/alternates line %d names an object directory, and this Effector holds no cache of the push's remote ($%s/%s); %s: repack the worktree (git repack -a -d) and remove its alternates file, or mount that cache", n, config.EnvRepos, name, sendRule)
	}
	return fmt.Sprintf("the worktree's .git/objects/info/alternates line %d names an object directory other than the cache of the push's remote ($%s/%s/objects); %s: clone from that cache (git clone --shared or --reference), or repack the worktree (git repack -a -d) and remove the entry", n, config.EnvRepos, name, sendRule)
}
