package valuedir

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// source tells the watcher when the value directory may have changed.
//
// stamp is what a consistent read rests on: it changes whenever anything
// in the directory (an entry of it or of a directory under it, or a file's
// bytes) changed since the last stamp. The inotify source counts events,
// which the kernel queues inside the very call that changes the
// directory, so equal stamps before and after a read mean nothing changed
// in between. The poll source compares what lstat says of every entry,
// whose times have the file system's resolution: a change and its undoing
// within one tick can go unseen by it, so it is the fallback only.
type source interface {
	// wait returns true when the directory may have changed, false when d
	// passed (or done closed) first.
	wait(done <-chan struct{}, d time.Duration) bool
	stamp() string
	close()
}

// Watch options; tests shorten them.
var (
	// pollEvery is how often the poll source looks at the directory.
	pollEvery = 500 * time.Millisecond
	// settle is how long the directory must stay quiet after a change
	// before it is read (a kubelet rotation is several steps).
	settle = 50 * time.Millisecond
	// settleMax bounds the wait for quiet.
	settleMax = time.Second
	// readTries is how many times a reload reads the set again when the
	// directory changed during the read, before it refuses with
	// RuleChanging (and waits for the next change).
	readTries = 20
)

// WatchOptions choose the watcher's source.
type WatchOptions struct {
	// Poll uses the poll source even where inotify works (tests).
	Poll bool
}

// Follower is what WatchDir keeps in step with a directory: the
// Custodian's values (Live) or the Effector's secrets.
type Follower interface {
	// Read reads the whole set from the directory, touching nothing but
	// the files, with a digest of what it read and of its refusal (it
	// only tells one read from another). err refuses the set.
	Read() (set any, digest [32]byte, err error)
	// Discard drops a set Read returned that was not taken: the
	// directory changed while it was read.
	Discard(set any)
	// Take takes a set (or its refusal) that was on disk at one moment.
	Take(set any, digest [32]byte, err error)
	// Expire drops what outlived its window and says when to call it
	// again (zero: no need).
	Expire() time.Time
}

// WatchDir follows dir for f until the returned stop is called (it waits
// for the watcher to end). Where inotify works (Linux) it watches the
// directory and every directory under it; elsewhere, or when inotify
// cannot be had, it polls every half second. Each change — the kubelet's
// new timestamped directory and ..data swap, a file renamed over another,
// a file written in place, removed or created — is followed, once the
// directory stayed quiet for settle, by one Read of the whole set, again
// until a stamp taken before the read equals one taken after it, so the
// set is the directory as it was at one moment; then Take. It also reads
// once at once, for a change between the first load and the watch. The
// watcher's goroutine touches only files and f: a host's own threads are
// never called from it.
func WatchDir(dir string, f Follower, o WatchOptions) (stop func()) {
	var src source
	if !o.Poll {
		if s, err := newNotify(dir); err == nil {
			src = s
		}
	}
	if src == nil {
		src = newPoll(dir)
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer src.close()
		run(src, f, done)
	}()
	return func() {
		close(done)
		<-ended
	}
}

func run(src source, f Follower, done <-chan struct{}) {
	f.Take(readConsistent(src, f))
	for {
		d := time.Hour
		if next := f.Expire(); !next.IsZero() {
			d = max(time.Until(next), time.Millisecond)
		}
		changed := src.wait(done, d)
		select {
		case <-done:
			return
		default:
		}
		if !changed {
			continue
		}
		// Wait for quiet: a rotation is several steps.
		for start := time.Now(); time.Since(start) < settleMax; {
			src.stamp()
			if !src.wait(done, settle) {
				break
			}
		}
		f.Take(readConsistent(src, f))
	}
}

// readConsistent reads the whole set until the source's stamp before the
// read equals the one after it: no change happened while it read, so the
// set (or the refusal) is the directory's at one moment.
func readConsistent(src source, f Follower) (any, [32]byte, error) {
	for i := 0; i < readTries; i++ {
		before := src.stamp()
		set, digest, err := f.Read()
		if src.stamp() == before {
			return set, digest, err
		}
		f.Discard(set)
		time.Sleep(time.Duration(i+1) * 5 * time.Millisecond)
	}
	return nil, sha256.Sum256([]byte("changing")), &ValueError{Secret: "-", Word: RuleChanging, err: fmt.Errorf("the directory kept changing while it was read; it is read again at its next change")}
}

// poll is the fallback source: a fingerprint of the directory's tree.
type poll struct {
	dir  string
	last string
}

// newPoll takes the directory's first fingerprint at once, so a change
// after Watch returned is a change.
func newPoll(dir string) *poll { return &poll{dir: dir, last: fingerprint(dir)} }

func (p *poll) wait(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(min(d, pollEvery))
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
	}
	s := p.stamp()
	changed := s != p.last
	p.last = s
	return changed
}

func (p *poll) stamp() string {
	return fingerprint(p.dir)
}

func (p *poll) close() {}

// fingerprint hashes what lstat says of every entry under dir (name, type,
// inode, size, modification and change times, a symlink's target), and
// what stat says of each top-level name (its file, through symlinks).
func fingerprint(dir string) string {
	h := sha256.New()
	n := 0
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		ents, err := os.ReadDir(filepath.Join(dir, rel))
		if err != nil {
			fmt.Fprintf(h, "!%s\n", rel)
			return
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			if n++; n > 4096 {
				return
			}
			p := filepath.Join(rel, e.Name())
			fi, err := os.Lstat(filepath.Join(dir, p))
			if err != nil {
				fmt.Fprintf(h, "?%s\n", p)
				continue
			}
			fmt.Fprintf(h, "%s %s", p, statLine(fi))
			if fi.Mode()&fs.ModeSymlink != 0 {
				t, _ := os.Readlink(filepath.Join(dir, p))
				fmt.Fprintf(h, " -> %s", t)
				if depth == 0 {
					if fi, err := os.Stat(filepath.Join(dir, p)); err == nil {
						fmt.Fprintf(h, " = %s", statLine(fi))
					}
				}
			}
			h.Write([]byte{'\n'})
			if fi.IsDir() && depth < 4 {
				walk(p, depth+1)
			}
		}
	}
	if fi, err := os.Stat(dir); err == nil {
		fmt.Fprintf(h, ". %s\n", statLine(fi))
	}
	walk("", 0)
	return string(h.Sum(nil))
}
