package bundle

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// The records the modes write that inspect puts first (replay's
// divergences) or lists as a table (preflight's plan); their fields are
// internal/mode's.

// divergences writes a replay's divergences, one line each, before the
// listing: they are why a replay went another way than its recording.
func divergences(w io.Writer, path string) error {
	var lines []string
	err := eachRecord(path, func(m map[string]json.RawMessage) {
		if unquote(m["kind"]) != KindReplayDiverged {
			return
		}
		lines = append(lines, fmt.Sprintf("  record %s: %s %s%s differs from record %s in %s",
			raw(m["seq"]), unquote(m["method"]), unquote(m["host"]), unquote(m["path"]), raw(m["nearest"]), unquote(m["field"])))
	})
	if err != nil || len(lines) == 0 {
		return err
	}
	_, err = fmt.Fprintf(w, "replay divergences: %d\n%s\n\n", len(lines), strings.Join(lines, "\n"))
	return err
}

// planRow is the part of an effect-planned record the table shows.
type planRow struct {
	Effect struct {
		Method string `json:"method"`
		Host   string `json:"host"`
		Port   int    `json:"port"`
		Path   string `json:"path"`
		Query  string `json:"query"`
		Body   string `json:"body_sha256"`
		Length int64  `json:"body_length"`
	} `json:"effect"`
	Secrets []string `json:"secrets"`
	Rule    string   `json:"rule"`
}

// Plan writes the effect-planned records of a preflight bundle as a table
// for approval: what each effect would send, the secrets it would spend
// and the rule that would allow it; then the verdict, which it returns.
func Plan(w io.Writer, path string) (Result, error) {
	res, err := Verify(path)
	if err != nil {
		return Result{}, err
	}
	out := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tMETHOD\tTARGET\tPATH\tBODY\tSECRETS\tRULE")
	n := 0
	err = eachRecord(path, func(m map[string]json.RawMessage) {
		if unquote(m["kind"]) != KindEffectPlanned {
			return
		}
		var p planRow
		line, _ := json.Marshal(m)
		json.Unmarshal(line, &p)
		target := fmt.Sprintf("%s:%d", p.Effect.Host, p.Effect.Port)
		pathQ := p.Effect.Path
		if p.Effect.Query != "" {
			pathQ += "?" + p.Effect.Query
		}
		body := "-"
		if p.Effect.Body != "" {
			body = fmt.Sprintf("%d B sha256:%.12s", p.Effect.Length, p.Effect.Body)
		}
		secrets := strings.Join(p.Secrets, ",")
		if secrets == "" {
			secrets = "-"
		}
		rule := p.Rule
		if rule == "" {
			rule = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", raw(m["seq"]), shorten(p.Effect.Method), shorten(target), shorten(pathQ), body, secrets, shorten(rule))
		n++
	})
	if err != nil {
		return Result{}, err
	}
	tw.Flush()
	fmt.Fprintf(out, "%d effects planned\n%s\n", n, res)
	if err := out.Flush(); err != nil {
		return Result{}, fmt.Errorf("bundle: inspect: %w", err)
	}
	return res, nil
}

// eachRecord calls fn with each line of the bundle at path that is a JSON
// object.
func eachRecord(path string, fn func(map[string]json.RawMessage)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	return eachLine(f, func(_ int, line []byte) error {
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) == nil {
			fn(m)
		}
		return nil
	})
}
