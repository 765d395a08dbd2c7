package landlock

import (
	"fmt"
	"math/bits"
	"strings"
)

// Access is a set of Landlock filesystem rights (LANDLOCK_ACCESS_FS_*).
type Access uint64

// The filesystem rights, with the kernel's values (include/uapi/linux/landlock.h;
// a test holds them equal to golang.org/x/sys/unix).
const (
	Execute     Access = 1 << 0  // execute a file
	WriteFile   Access = 1 << 1  // open a file for writing
	ReadFile    Access = 1 << 2  // open a file for reading
	ReadDir     Access = 1 << 3  // open a directory, list its entries
	RemoveDir   Access = 1 << 4  // remove an empty directory, rename one away
	RemoveFile  Access = 1 << 5  // unlink a file, rename one away
	MakeChar    Access = 1 << 6  // create a character device
	MakeDir     Access = 1 << 7  // create a directory
	MakeReg     Access = 1 << 8  // create a regular file
	MakeSock    Access = 1 << 9  // create a Unix socket
	MakeFifo    Access = 1 << 10 // create a named pipe
	MakeBlock   Access = 1 << 11 // create a block device
	MakeSym     Access = 1 << 12 // create a symbolic link
	Refer       Access = 1 << 13 // link or rename a file from or to another directory
	Truncate    Access = 1 << 14 // truncate a file (truncate(2), ftruncate(2), O_TRUNC)
	IoctlDev    Access = 1 << 15 // ioctl(2) on a character or block device
	ResolveUnix Access = 1 << 16 // connect(2) to a pathname Unix socket
)

// Scope is a set of Landlock IPC scopes (LANDLOCK_SCOPE_*): what a domain
// may not reach outside itself.
type Scope uint64

// The scopes, with the kernel's values.
const (
	ScopeAbstractUnix Scope = 1 << 0 // connect to an abstract Unix socket made outside the domain
	ScopeSignal       Scope = 1 << 1 // send a signal to a process outside the domain
)

// ABI is one Landlock ABI version and what it added to the one before.
type ABI struct {
	Version int
	FS      Access // filesystem rights first handled in this version
	Scopes  Scope  // IPC scopes first offered in this version
	Note    string // what else the version brought, for the reader
}

// ABIs is every known ABI version, oldest first; a test holds it ordered.
// Rights are data: each entry lists the filesystem rights and scopes that
// version added; FS and Scopes fold the table up to a version, and the
// named access sets (ReadExec, ReadFile, ReadWrite) are masked to a
// ruleset's handled rights when a rule is added (AddPath), rights that
// apply only to directories dropped from a rule on a file.
// A kernel newer than the last entry is treated as the last entry: rights
// this table does not know are not handled.
var ABIs = []ABI{
	{1, Execute | WriteFile | ReadFile | ReadDir | RemoveDir | RemoveFile |
		MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym, 0,
		"Linux 5.13: the filesystem rights"},
	{2, Refer, 0, "Linux 5.19: links and renames across directories"},
	{3, Truncate, 0, "Linux 6.2: truncation"},
	{4, 0, 0, "Linux 6.7: TCP bind and connect (network, not handled here)"},
	{5, IoctlDev, 0, "Linux 6.10: ioctl on devices"},
	{6, 0, ScopeAbstractUnix | ScopeSignal, "Linux 6.12: abstract Unix sockets and signals scoped"},
	{7, 0, 0, "Linux 6.15: audit logging flags"},
	{8, 0, 0, "after Linux 6.18: restrict every thread at once (TSYNC, not used here)"},
	{9, ResolveUnix, 0, "after ABI 8: connect to pathname Unix sockets"},
}

// LastABI is the newest version in ABIs.
func LastABI() int { return ABIs[len(ABIs)-1].Version }

// FS is every filesystem right of ABI versions 1 through abi, the rights a
// ruleset made for a kernel offering abi handles. abi past LastABI folds
// the whole table; abi below 1 is the empty set.
func FS(abi int) Access {
	a, _ := fold(abi)
	return a
}

// Scopes is every IPC scope of ABI versions 1 through abi.
func Scopes(abi int) Scope {
	_, s := fold(abi)
	return s
}

func fold(abi int) (a Access, s Scope) {
	for _, v := range ABIs {
		if v.Version > abi {
			break
		}
		a |= v.FS
		s |= v.Scopes
	}
	return a, s
}

// The named access sets. Each is masked to the ruleset's handled rights
// when a rule is added, and to FileRights when the rule's path is a file.
const (
	// ReadExec reads, lists and executes: the system tree.
	ReadExec = Execute | ReadFile | ReadDir
	// ReadWrite is every right but making a device node: a scratch tree
	// the program owns, or a device it reads and writes.
	ReadWrite = Execute | WriteFile | ReadFile | ReadDir | RemoveDir | RemoveFile |
		MakeDir | MakeReg | MakeSock | MakeFifo | MakeSym |
		Refer | Truncate | IoctlDev | ResolveUnix

	// MakeDevice is making a character or block device node. It is
	// handled by every ruleset and granted by no rule: AddPath strips it.
	// A device node made in a writable tree would open what the rules
	// deny by path (a kmsg or a loop device beside the program), and a
	// hard link of an allowed device into the tree needs it too.
	MakeDevice = MakeChar | MakeBlock
)

// FileRights are the rights a rule on a file (not a directory) may carry;
// the kernel refuses directory rights on a file.
const FileRights = Execute | WriteFile | ReadFile | Truncate | IoctlDev

var accessNames = [...]string{
	"execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file",
	"make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block",
	"make_sym", "refer", "truncate", "ioctl_dev", "resolve_unix",
}

// String names the rights, e.g. "execute|read_file|read_dir".
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var names []string
	for rest := uint64(a); rest != 0; rest &= rest - 1 {
		i := bits.TrailingZeros64(rest)
		if i < len(accessNames) {
			names = append(names, accessNames[i])
		} else {
			names = append(names, fmt.Sprintf("bit%d", i))
		}
	}
	return strings.Join(names, "|")
}
