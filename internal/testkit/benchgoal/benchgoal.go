// Package benchgoal prints the goal rows of `make bench`: each figure the
// project set a goal for, what this run measured, the goal, a pass or short
// mark and, for a short row, the limit that stops it — measured in the
// same run where it can be (a floor beside the figure), with where its
// profile comes from. With JR2_BENCH_GOALS naming a file, each row is also
// appended to it, tab separated (figure, now, goal, mark, limit), for the
// summary scripts/bench.sh prints and writes into the README.
//
// Invariant: a row is marked pass only when the value was measured and
// meets its goal; a row without a goal (OK nil) is marked "-", a measured
// figure shown for comparison; an unmeasured value is "not measured" and
// short.
package benchgoal

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// Row is one goal row.
type Row struct {
	Figure string
	Value  float64            // < 0: not measured
	OK     func(float64) bool // nil: no goal, a figure for comparison
	Want   string             // the goal as printed
	Format string             // how Value prints
	Limit  string             // for a short row: what stops it
}

// Mark is "pass", "short" or "-".
func (r Row) Mark() string {
	switch {
	case r.OK == nil:
		return "-"
	case r.Value >= 0 && r.OK(r.Value):
		return "pass"
	}
	return "short"
}

// Print writes rows as a table to w and appends them to JR2_BENCH_GOALS.
func Print(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tnow\tgoal\t\tlimit\t")
	var lines []string
	for _, r := range rows {
		now := fmt.Sprintf(r.Format, r.Value)
		if r.Value < 0 {
			now = "not measured"
		}
		limit := ""
		if r.Mark() == "short" {
			limit = r.Limit
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Figure, now, r.Want, r.Mark(), limit)
		lines = append(lines, strings.Join([]string{r.Figure, now, r.Want, r.Mark(), limit}, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	return Append(lines)
}

// Append adds tab-separated goal lines to JR2_BENCH_GOALS, if set.
func Append(lines []string) error {
	path := os.Getenv("JR2_BENCH_GOALS")
	if path == "" || len(lines) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, strings.Join(lines, "\n")+"\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
