package bundle

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// maxValue bounds one field's rendering in the human listing; the JSON
// listing is never shortened.
const maxValue = 96

// Inspect lists the bundle at path on w: a replay's divergences first
// (why it went another way than its recording), then one line per record (seq, time,
// kind, then the other fields as key=value, each value compact JSON cut at
// 96 bytes) and the verdict of Verify last; with asJSON, one JSON object
// {"verdict":…,"exit":…,"records":[…]} holding every record whole. A line
// that is not a JSON object is listed as such, never skipped. It returns
// the verdict.
func Inspect(w io.Writer, path string, asJSON bool) (Result, error) {
	res, err := Verify(path)
	if err != nil {
		return Result{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	out := bufio.NewWriter(w)
	if asJSON {
		err = listJSON(out, f, res)
	} else if err = divergences(out, path); err == nil {
		err = listText(out, f, res)
	}
	if err != nil {
		return Result{}, err
	}
	if err := out.Flush(); err != nil {
		return Result{}, fmt.Errorf("bundle: inspect: %w", err)
	}
	return res, nil
}

// eachLine calls fn with each line of r (a last line without '\n' too) and
// its number from 1.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ferr := fn(n, bytes.TrimSuffix(line, []byte("\n"))); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bundle: read: %w", err)
		}
	}
}

func listText(w *bufio.Writer, r io.Reader, res Result) error {
	err := eachLine(r, func(n int, line []byte) error {
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) != nil {
			fmt.Fprintf(w, "line %d: not a record (%d bytes)\n", n, len(line))
			return nil
		}
		fmt.Fprintf(w, "%s %s %s", raw(m["seq"]), unquote(m["time"]), unquote(m["kind"]))
		keys := make([]string, 0, len(m))
		for k := range m {
			switch k {
			case "seq", "time", "kind", "prev":
			default:
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, " %s=%s", k, shorten(raw(m[k])))
		}
		return w.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, res)
	return err
}

func listJSON(w *bufio.Writer, r io.Reader, res Result) error {
	fmt.Fprintf(w, `{"verdict":%q,"exit":%d,"records":[`, res.String(), res.ExitCode())
	first := true
	err := eachLine(r, func(n int, line []byte) error {
		var v any
		item := line
		if json.Unmarshal(line, &v) != nil {
			item = fmt.Appendf(nil, `{"line":%d,"error":"not a record"}`, n)
		} else if _, ok := v.(map[string]any); !ok {
			item = fmt.Appendf(nil, `{"line":%d,"error":"not a record"}`, n)
		}
		if !first {
			w.WriteByte(',')
		}
		first = false
		_, err := w.Write(item)
		return err
	})
	if err != nil {
		return err
	}
	_, err = w.WriteString("]}\n")
	return err
}

// raw renders a JSON value compactly; a missing one as "-".
func raw(v json.RawMessage) string {
	if v == nil {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

func unquote(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return raw(v)
	}
	return s
}

// shorten cuts s to maxValue bytes on a rune boundary, marking the cut.
func shorten(s string) string {
	if len(s) <= maxValue {
		return s
	}
	cut := maxValue
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + fmt.Sprint(len(s)) + " bytes)"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// VerifyUsage and InspectUsage are the usage of `custodian verify` and
// `custodian inspect`; InspectFlags are the flags InspectMain knows (the
// usage tests hold each usage to its flags; verify has none).
const (
	VerifyUsage = "usage: custodian verify [--pubkey ed25519:KEY] BUNDLE.jsonl\n" +
		"  --pubkey KEY  the key the run printed on its stderr: the bundle must be the one that run wrote\n"
	InspectUsage = "usage: custodian inspect BUNDLE.jsonl [--json | --plan]\n"
)

// VerifyFlags are verify's flags.
var VerifyFlags = []string{"pubkey"}

// InspectFlags are inspect's flags: --json lists every record whole,
// --plan lists a preflight's effect-planned records as a table.
var InspectFlags = []string{"json", "plan"}

// isHelp reports whether a is -h, -help, --h or --help.
func isHelp(a string) bool {
	switch a {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// VerifyMain is `custodian verify BUNDLE`: it prints the verdict and
// returns the exit code (0 VERIFIED, 3 TRUNCATED, 4 TAMPERED, 2 for a
// usage or read error; --help prints the usage on stdout, 0).
func VerifyMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, VerifyUsage)
		return 0
	}
	var key ed25519.PublicKey
	if len(args) == 3 && (args[0] == "--pubkey" || args[0] == "-pubkey") {
		k, err := ParseKey(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "custodian verify: --pubkey: %v\n", err)
			return 2
		}
		key, args = k, args[2:]
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, VerifyUsage)
		return 2
	}
	res, err := verifyFile(args[0], key)
	if err != nil {
		fmt.Fprintf(stderr, "custodian verify: %s\n", readError(err))
		return 2
	}
	fmt.Fprintln(stdout, res)
	return res.ExitCode()
}

// InspectMain is `custodian inspect BUNDLE [--json]`: it lists the bundle
// and returns the exit code of its verdict, as VerifyMain does, so a
// listing of a tampered bundle cannot pass for a good one in a script.
func InspectMain(args []string, stdout, stderr io.Writer) int {
	var file string
	asJSON, plan, bad := false, false, false
	for _, a := range args {
		switch {
		case isHelp(a):
			fmt.Fprint(stdout, InspectUsage)
			return 0
		case a == "--"+InspectFlags[0]:
			asJSON = true
		case a == "--"+InspectFlags[1]:
			plan = true
		case strings.HasPrefix(a, "-") || file != "":
			bad = true
		default:
			file = a
		}
	}
	if bad || file == "" || (asJSON && plan) {
		fmt.Fprint(stderr, InspectUsage)
		return 2
	}
	inspect := Inspect
	if plan {
		inspect = func(w io.Writer, path string, _ bool) (Result, error) { return Plan(w, path) }
	}
	res, err := inspect(stdout, file, asJSON)
	if err != nil {
		fmt.Fprintf(stderr, "custodian inspect: %s\n", readError(err))
		return 2
	}
	return res.ExitCode()
}

// readError renders err without the path it may carry.
func readError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return "cannot " + pe.Op + " the bundle: " + pe.Err.Error()
	}
	return err.Error()
}

func verifyFile(path string, key ed25519.PublicKey) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	return VerifyKeyed(f, key)
}
