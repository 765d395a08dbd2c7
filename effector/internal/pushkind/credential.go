package pushkind

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"jr2.dev/boundary/internal/effectorkey"
)

const credentialUsage = "usage: effector credential --password-file FILE --username USER --host HOST get|store|erase"

// CredentialFlags is the credential helper's flag set; effector's usage
// names each (effector/usage_test.go).
func CredentialFlags() (fs *flag.FlagSet, file, user, host *string) {
	fs = flag.NewFlagSet("credential", flag.ContinueOnError)
	return fs, fs.String("password-file", "", "the token's file"),
		fs.String("username", "", "the user the token is sent with"),
		fs.String("host", "", "the host (and :port) the token is for")
}

// CredentialMain is `effector credential --password-file F --username U
// --host H ACTION`: git's credential helper for an https push. git runs it
// (through the push's command-line config) with the request on stdin; for
// "get" of https at host H it answers U and the token read from F — a file
// in the push's own scratch, written from the bytes the Effector read at
// start — so the token is in no argv, in no environment and in no file git
// reads. Any other request, "store" and "erase" get no answer. It returns
// the exit code.
func CredentialMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, credentialUsage)
		return 0
	}
	fs, file, user, host := CredentialFlags()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *file == "" || *user == "" || *host == "" {
		fmt.Fprintln(stderr, "effector credential: want --password-file F --username U --host H get|store|erase; "+credentialUsage)
		return 2
	}
	req, err := readCredentialRequest(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "effector credential: %v\n", err)
		return 1
	}
	if fs.Arg(0) != "get" || req["protocol"] != "https" || req["host"] != *host {
		return 0
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(stderr, "effector credential: the token cannot be read")
		return 1
	}
	tok := effectorkey.TrimNewline(b)
	if strings.ContainsAny(string(tok), "\n\r\x00") {
		fmt.Fprintln(stderr, "effector credential: the token holds a line break")
		return 1
	}
	fmt.Fprintf(stdout, "username=%s\npassword=%s\n", *user, tok)
	return 0
}

// readCredentialRequest reads git's "key=value" lines up to a blank line
// or the end (gitcredentials(7)).
func readCredentialRequest(r io.Reader) (map[string]string, error) {
	req := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, errors.New("a request line with no '='")
		}
		req[k] = v
	}
	return req, sc.Err()
}
