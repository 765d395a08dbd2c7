// Command benchtable reads `go test -bench` output on stdin and prints it as
// a table: one row per benchmark, one column per unit it reported (ns/op,
// MB/s, B/op, allocs/op and any b.ReportMetric unit), and with -vs a column
// comparing each row's ns/op (or, with -unit, another unit) to a reference
// row's.
//
//	go test ./filter/scrub -run '^$' -bench . | go run ./scripts/benchtable -title scrub -vs 'Baseline/bytes.Index' -unit MB/s
//
// Lines that report a failure (FAIL, panic, --- FAIL) pass through to
// stderr, so a failing benchmark still shows why. It only formats: it decides nothing.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

type row struct {
	name string
	vals map[string]float64
}

func main() {
	title := flag.String("title", "", "a heading printed above the table")
	vs := flag.String("vs", "", "regexp naming the reference benchmark for the ratio column")
	unit := flag.String("unit", "ns/op", "the unit the ratio column compares")
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
	return rows, units, sc.Err()
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
