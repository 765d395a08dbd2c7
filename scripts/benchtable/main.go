// Command benchtable reads `go test -bench` output on stdin and prints it as
// a table: one row per benchmark, one column per unit it reported (ns/op,
// MB/s, B/op, allocs/op and any b.ReportMetric unit), and with -vs a column
// comparing each row's ns/op (or, with -unit, another unit) to a reference
// row's.
//
//	go test ./filter/scrub -run '^$' -bench . | go run ./scripts/benchtable -title scrub -vs 'Baseline/bytes.Index' -unit MB/s
//
// Each -goal (repeatable) is one of the project's goal rows, checked against
// a row of the table and printed below it with a pass or short mark:
//
//	-goal 'FIGURE|ROW|UNIT|OP|VALUE[|LIMIT]'
//
// ROW is a regexp naming the benchmark, UNIT the unit read from it, OP one
// of >= <= ==, and VALUE a number or @ROW2[+N] (another row's value of the
// same unit, plus N). LIMIT, printed beside a short row, says what stops
// it; each {ROW UNIT} in it is replaced by that row's measured value, so a
// floor measured in the same run stands beside the figure. With
// JR2_BENCH_GOALS set, each goal row is appended to that file as figure,
// measured, goal, mark, limit (tab separated; internal/testkit/benchgoal), the
// lines make bench's summary prints.
//
// A benchmark run more than once (go test -count N) is one row: each
// unit's median over its runs, so one slow moment of a shared machine
// does not decide a goal.
//
// Lines that report a failure (FAIL, panic, --- FAIL) pass through to
// stderr, so a failing benchmark still shows why. It only formats and
// compares: a short goal does not fail it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"jr2.dev/boundary/internal/testkit/benchgoal"
)

type row struct {
	name string
	vals map[string]float64
}

func main() {
	title := flag.String("title", "", "a heading printed above the table")
	vs := flag.String("vs", "", "regexp naming the reference benchmark for the ratio column")
	unit := flag.String("unit", "ns/op", "the unit the ratio column compares")
	var goals []string
	flag.Func("goal", "a goal row: 'FIGURE|ROW|UNIT|OP|VALUE[|LIMIT]' (repeatable)", func(v string) error {
		if n := len(strings.Split(v, "|")); n != 5 && n != 6 {
			return fmt.Errorf("want FIGURE|ROW|UNIT|OP|VALUE[|LIMIT], got %q", v)
		}
		goals = append(goals, v)
		return nil
	})
	flag.Parse()
	rows, units, err := parse(os.Stdin, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results on stdin")
		os.Exit(1)
	}
	var ref *row
	if *vs != "" {
		re, err := regexp.Compile(*vs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable: -vs:", err)
			os.Exit(2)
		}
		for i := range rows {
			if re.MatchString(rows[i].name) {
				ref = &rows[i]
				break
			}
		}
		if ref == nil {
			fmt.Fprintf(os.Stderr, "benchtable: no benchmark matches -vs %q\n", *vs)
			os.Exit(1)
		}
	}
	write(os.Stdout, *title, rows, units, ref, *unit)
	if len(goals) > 0 {
		marks, err := checkGoals(rows, goals)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable: -goal:", err)
			os.Exit(2)
		}
		writeGoals(os.Stdout, marks)
		var lines []string
		for _, m := range marks {
			lines = append(lines, strings.Join([]string{m.figure, m.now, m.goal, m.mark, m.limit}, "\t"))
		}
		if err := benchgoal.Append(lines); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
}

// mark is one goal row checked: its figure, what was measured, the goal,
// "pass" or "short", and for a short row what stops it.
type mark struct{ figure, now, goal, mark, limit string }

var limitRef = regexp.MustCompile(`\{(\S+) (\S+)\}`)

func checkGoals(rows []row, goals []string) ([]mark, error) {
	find := func(expr, unit string) (float64, bool, error) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return 0, false, err
		}
		for _, r := range rows {
			if re.MatchString(r.name) {
				v, ok := r.vals[unit]
				return v, ok, nil
			}
		}
		return 0, false, nil
	}
	var out []mark
	for _, g := range goals {
		f := strings.Split(g, "|")
		figure, expr, unit, op, want := f[0], f[1], f[2], f[3], f[4]
		limit := ""
		if len(f) == 6 {
			limit = limitRef.ReplaceAllStringFunc(f[5], func(ref string) string {
				m := limitRef.FindStringSubmatch(ref)
				if v, ok, err := find(m[1], m[2]); err == nil && ok {
					return show(v, m[2])
				}
				return "(not measured)"
			})
		}
		v, ok, err := find(expr, unit)
		if err != nil {
			return nil, err
		}
		m := mark{figure: figure, now: "not measured", goal: op + " " + want + " " + unit, mark: "short"}
		var target float64
		switch {
		case strings.HasPrefix(want, "@"):
			ref, plus, _ := strings.Cut(want[1:], "+")
			rv, rok, err := find(ref, unit)
			if err != nil {
				return nil, err
			}
			if plus != "" {
				n, err := strconv.ParseFloat(plus, 64)
				if err != nil {
					return nil, fmt.Errorf("%q: %v", g, err)
				}
				rv += n
			}
			target, ok = rv, ok && rok
			m.goal = fmt.Sprintf("%s %s (%s)", op, show(rv, unit), want[1:])
		default:
			n, err := strconv.ParseFloat(want, 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", g, err)
			}
			target = n
			m.goal = op + " " + show(n, unit)
		}
		if ok {
			m.now = show(v, unit)
			pass := false
			switch op {
			case ">=":
				pass = v >= target
			case "<=":
				pass = v <= target
			case "==":
				pass = v == target
			default:
				return nil, fmt.Errorf("%q: OP must be >=, <= or ==", g)
			}
			if pass {
				m.mark = "pass"
			}
		}
		if m.mark == "short" {
			m.limit = limit
		}
		out = append(out, m)
	}
	return out, nil
}

func writeGoals(w io.Writer, marks []mark) {
	fmt.Fprintf(w, "\n| goal | now | goal | | limit |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range marks {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.figure, m.now, m.goal, m.mark, m.limit)
	}
}

var gomaxprocs = regexp.MustCompile(`-\d+$`)

// parse reads benchmark lines: name, iterations, then value-unit pairs.
func parse(r io.Reader, rest io.Writer) ([]row, []string, error) {
	var rows []row
	var units []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			if failure(line) {
				fmt.Fprintln(rest, line)
			}
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			if failure(line) {
				fmt.Fprintln(rest, line)
			}
			continue
		}
		rw := row{name: gomaxprocs.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), ""), vals: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			rw.vals[f[i+1]] = v
			if !seen[f[i+1]] {
				seen[f[i+1]] = true
				units = append(units, f[i+1])
			}
		}
		rows = append(rows, rw)
	}
	return medians(rows), units, sc.Err()
}

// medians makes the runs of one benchmark one row, in the order of its
// first run, each unit the median of the runs that reported it (of an
// even count, the mean of the middle two).
func medians(rows []row) []row {
	var out []row
	runs := map[string][]map[string]float64{}
	for _, r := range rows {
		if _, ok := runs[r.name]; !ok {
			out = append(out, row{name: r.name})
		}
		runs[r.name] = append(runs[r.name], r.vals)
	}
	for i := range out {
		byUnit := map[string][]float64{}
		for _, vals := range runs[out[i].name] {
			for u, v := range vals {
				byUnit[u] = append(byUnit[u], v)
			}
		}
		out[i].vals = map[string]float64{}
		for u, vs := range byUnit {
			slices.Sort(vs)
			m := vs[len(vs)/2]
			if len(vs)%2 == 0 {
				m = (vs[len(vs)/2-1] + m) / 2
			}
			out[i].vals[u] = m
		}
	}
	return out
}

func failure(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "FAIL") || strings.HasPrefix(t, "--- FAIL") || strings.HasPrefix(t, "panic") || strings.Contains(t, "_test.go:")
}

func write(w io.Writer, title string, rows []row, units []string, ref *row, unit string) {
	if title != "" {
		fmt.Fprintf(w, "\n### %s\n\n", title)
	}
	head := append([]string{"benchmark"}, units...)
	if ref != nil {
		head = append(head, unit+" vs "+ref.name)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(head)))
	for _, r := range rows {
		cells := []string{r.name}
		for _, u := range units {
			if v, ok := r.vals[u]; ok {
				cells = append(cells, num(v))
			} else {
				cells = append(cells, "")
			}
		}
		if ref != nil {
			a, ok1 := r.vals[unit]
			b, ok2 := ref.vals[unit]
			if ok1 && ok2 && b != 0 {
				cells = append(cells, fmt.Sprintf("%.3g×", a/b))
			} else {
				cells = append(cells, "")
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// show is v in unit as a goal row prints it: a time per op in the unit a
// reader takes in at a glance (346.7 ms, not 346734740 ns/op), anything
// else as num and its unit.
func show(v float64, unit string) string {
	if unit == "ns/op" {
		switch {
		case v >= 1e9:
			return strconv.FormatFloat(v/1e9, 'f', 2, 64) + " s"
		case v >= 1e6:
			return strconv.FormatFloat(v/1e6, 'f', 1, 64) + " ms"
		case v >= 1e3:
			return strconv.FormatFloat(v/1e3, 'f', 1, 64) + " µs"
		}
		return num(v) + " ns"
	}
	return num(v) + " " + unit
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
