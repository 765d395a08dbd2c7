// Package docs_test holds the reference in docs/ and the code together.
//
// Every list it checks is derived from the code (go/ast over the source,
// or an exported table), never copied: a refusal, a reason word, a log
// field, a record kind, an env variable or a flag the code gains without a
// line in docs/ fails TestDocs*. Every relative link in docs/ and in the
// top-level README resolves inside the repository, and no link leaves it;
// every test a page names exists; every example a page marks with
// <!-- file: PATH --> is that file's text, byte for byte.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/internal/contract"
)

// root is the repository root (this package's parent).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", r, err)
	}
	return r
}

// page is one docs page, read whole and with every run of white space made
// one space, so a message wrapped across lines still matches.
type page struct {
	name, raw, flat string
}

var space = regexp.MustCompile(`\s+`)

func readPage(t *testing.T, name string) page {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", name))
	if err != nil {
		t.Fatalf("docs/%s: %v", name, err)
	}
	return page{name: name, raw: string(b), flat: space.ReplaceAllString(string(b), " ")}
}

func flat(s string) string { return strings.TrimSpace(space.ReplaceAllString(s, " ")) }

// has reports whether the page holds s (white space folded).
func (p page) has(s string) bool { return strings.Contains(p.flat, flat(s)) }

// source is the parsed non-test Go files of one directory of the module.
type source struct {
	dir   string
	files map[string]*ast.File // base name -> file
}

func parseDir(t *testing.T, rel string) source {
	t.Helper()
	dir := filepath.Join(root(t), filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := source{dir: rel, files: map[string]*ast.File{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		s.files[n] = f
	}
	if len(s.files) == 0 {
		t.Fatalf("%s: no Go source", rel)
	}
	return s
}

// only is s restricted to the named files.
func (s source) only(names ...string) source {
	out := source{dir: s.dir, files: map[string]*ast.File{}}
	for _, n := range names {
		if f, ok := s.files[n]; ok {
			out.files[n] = f
		}
	}
	return out
}

func (s source) each(fn func(ast.Node) bool) {
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ast.Inspect(s.files[n], fn)
	}
}

// goDirs are every directory of the module holding non-test Go source,
// relative to the root, docs/ and testdata left out.
func goDirs(t *testing.T) []string {
	t.Helper()
	r := root(t)
	seen := map[string]bool{}
	walkSource(t, r, func(p string) {
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(r, filepath.Dir(p))
			seen[filepath.ToSlash(rel)] = true
		}
	}, "docs", "bin")
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// walkSource calls fn with every file of the repository's source tree: it
// skips what the go tool skips (a directory named with a leading "." or "_",
// and testdata), node_modules and the named directories. .cache is where a
// run keeps its tools, and where a check of leftovers overlays /tmp — files
// that come and go while other packages build — so it is never read; an
// error of the walk fails the test rather than cutting the list short.
func walkSource(t *testing.T, r string, fn func(path string), skip ...string) {
	t.Helper()
	err := filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != r && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "node_modules" || slices.Contains(skip, n)) {
				return filepath.SkipDir
			}
			return nil
		}
		fn(p)
		return nil
	})
	if err != nil {
		t.Fatalf("walking the source tree: %v", err)
	}
}

// TestWalkSourceSkips: the source walk reads neither a run's .cache (where
// a check of leftovers keeps an overlaid /tmp whose build files vanish
// mid-walk) nor what the go tool itself ignores.
func TestWalkSourceSkips(t *testing.T) {
	r := t.TempDir()
	for _, f := range []string{".cache/leftovers/_tmp/upper/a.go", "_x/b.go", "pkg/testdata/c.go", "pkg/node_modules/d.go", "bin/e.go", "pkg/f.go", "g.go"} {
		if err := os.MkdirAll(filepath.Join(r, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	walkSource(t, r, func(p string) {
		rel, _ := filepath.Rel(r, p)
		got = append(got, filepath.ToSlash(rel))
	}, "bin")
	if want := []string{"g.go", "pkg/f.go"}; !slices.Equal(got, want) {
		t.Errorf("walked %q, want %q", got, want)
	}
}

// consts maps the string constants of the packages parsed: a name alone
// (its own package's) and pkg.Name (how another package writes it).
type consts map[string]string

func (c consts) add(pkg string, s source) {
	s.each(func(n ast.Node) bool {
		g, ok := n.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			return true
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if v, ok := c.str(vs.Values[i]); ok {
					c[name.Name] = v
					c[pkg+"."+name.Name] = v
				}
			}
		}
		return false
	})
}

// str evaluates e when it is a string known here: a literal, a constant,
// or a concatenation of those.
func (c consts) str(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		v, ok := c[x.Name]
		return v, ok
	case *ast.SelectorExpr:
		if p, ok := x.X.(*ast.Ident); ok {
			v, ok := c[p.Name+"."+x.Sel.Name]
			return v, ok
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			a, ok1 := c.str(x.X)
			b, ok2 := c.str(x.Y)
			return a + b, ok1 && ok2
		}
	case *ast.ParenExpr:
		return c.str(x.X)
	}
	return "", false
}

// pieces are the known runs of a concatenation: "jr2 custodian: "+t+" is
// guarded" gives "jr2 custodian:" and "is guarded". A run shorter than four
// bytes says nothing and is left out.
func (c consts) pieces(e ast.Expr) []string {
	var terms []ast.Expr
	var flatten func(ast.Expr)
	flatten = func(e ast.Expr) {
		if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
			flatten(b.X)
			flatten(b.Y)
			return
		}
		terms = append(terms, e)
	}
	flatten(e)
	var out []string
	var run strings.Builder
	end := func() {
		if s := strings.TrimSpace(run.String()); len(s) >= 4 {
			out = append(out, s)
		}
		run.Reset()
	}
	for _, term := range terms {
		if s, ok := c.str(term); ok {
			run.WriteString(s)
			continue
		}
		end()
	}
	end()
	return out
}

var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)

// formatPieces are the fixed runs of a printf format.
func formatPieces(format string) []string {
	var out []string
	for _, s := range verb.Split(format, -1) {
		if s = strings.TrimSpace(s); len(s) >= 4 {
			out = append(out, s)
		}
	}
	return out
}

// callName is the name a call is made by: f(…) or x.f(…).
func callName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// want collects what a page must hold, each with where the code says it.
type want struct {
	what, where string
}

func check(t *testing.T, p page, kind string, ws []want) {
	t.Helper()
	if len(ws) == 0 {
		t.Fatalf("docs/%s: found no %s in the code; the test's derivation is broken", p.name, kind)
	}
	seen := map[string]bool{}
	for _, w := range ws {
		if seen[w.what] {
			continue
		}
		seen[w.what] = true
		if !p.has(w.what) {
			t.Errorf("docs/%s does not hold the %s %q (%s)", p.name, kind, w.what, w.where)
		}
	}
}

func tick(s string) string { return "`" + s + "`" }

// TestDocsEngineAnswers: every answer the engine and its hosts make —
// status, reason word and text — is in docs/custodian.md, and every reason
// word is there in backticks.
func TestDocsEngineAnswers(t *testing.T) {
	c := consts{}
	fsrc := parseDir(t, "filter")
	c.add("filter", fsrc)
	ssrc := parseDir(t, "filter/stream")
	c.add("stream", ssrc)
	bsrc := parseDir(t, "controlplane/internal/bootstrap").only("replies.go")
	c.add("bootstrap", bsrc)
	c.add("pluginconf", parseDir(t, "filter/pluginconf"))
	msrc := parseDir(t, "filter/module")
	c.add("module", msrc)
	p := readPage(t, "custodian.md")

	var texts, reasons, statuses []want
	// reply(status, Reason, body) in the engine.
	fsrc.each(func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || callName(call) != "reply" || len(call.Args) != 3 {
			return true
		}
		at := "filter reply(" + exprText(call.Args[1]) + ")"
		if st, ok := call.Args[0].(*ast.BasicLit); ok {
			statuses = append(statuses, want{st.Value, at})
		}
		if r, ok := c.str(call.Args[1]); ok {
			reasons = append(reasons, want{tick(r), at})
		}
		for _, s := range c.pieces(call.Args[2]) {
			texts = append(texts, want{s, at})
		}
		return true
	})
	// Replies built as composite literals by the stream machine and the Go
	// host, and the stream machine's misconfig sentences.
	for _, s := range []source{ssrc, parseDir(t, "custodian/internal/serve"), parseDir(t, "custodian/internal/relay")} {
		replyLiterals(s, c, "custodian", &texts, &reasons)
		s.each(func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || exprText(cl.Type) != "misconfig" || len(cl.Elts) != 2 {
				return true
			}
			if w, ok := c.str(cl.Elts[0]); ok {
				reasons = append(reasons, want{tick(w), "stream misconfig"})
			}
			for _, s := range c.pieces(cl.Elts[1]) {
				texts = append(texts, want{s, "stream misconfig"})
			}
			return true
		})
	}
	for name, v := range c {
		if strings.HasPrefix(name, "filter.Reason") || strings.HasPrefix(name, "stream.Reason") {
			reasons = append(reasons, want{tick(v), name})
		}
	}
	// Envoy's own answers (bootstrap's mappers).
	bsrc.each(func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ValueSpec:
			for i, name := range x.Names {
				if strings.HasSuffix(name.Name, "Text") && i < len(x.Values) {
					for _, s := range c.pieces(x.Values[i]) {
						texts = append(texts, want{envoyText(s), "bootstrap." + name.Name})
					}
				}
			}
		case *ast.FuncDecl:
			if strings.HasSuffix(x.Name.Name, "Text") {
				ast.Inspect(x.Body, func(n ast.Node) bool {
					if r, ok := n.(*ast.ReturnStmt); ok {
						for _, s := range c.pieces(r.Results[0]) {
							texts = append(texts, want{envoyText(s), "bootstrap." + x.Name.Name})
						}
					}
					return true
				})
			}
		}
		return true
	})
	// The fixed bodies of a failed stream (stream.InternalErrorBody,
	// module.FailedBody).
	for _, s := range []source{ssrc, msrc} {
		s.each(func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if strings.HasSuffix(name.Name, "Body") && i < len(vs.Values) {
						for _, p := range c.pieces(vs.Values[i]) {
							texts = append(texts, want{p, s.dir + "." + name.Name})
						}
					}
				}
			}
			return true
		})
	}
	check(t, p, "answer text", texts)
	check(t, p, "reason word", reasons)
	check(t, p, "status", statuses)
}

// envoyText is a mapper text as the page writes it: Envoy's command
// operators stand for the target and the reason.
func envoyText(s string) string {
	s = strings.ReplaceAll(s, "%REQ(:AUTHORITY):256%", "<target>")
	return strings.ReplaceAll(s, "%RESPONSE_CODE_DETAILS%", "<details>")
}

// replyLiterals collects the Body and Reason of every filter.Reply literal.
func replyLiterals(s source, c consts, where string, texts, reasons *[]want) {
	s.each(func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if tn := exprText(cl.Type); tn != "filter.Reply" && tn != "Reply" {
			return true
		}
		for _, e := range cl.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch exprText(kv.Key) {
			case "Body":
				for _, p := range c.pieces(kv.Value) {
					*texts = append(*texts, want{p, where + " Reply literal in " + s.dir})
				}
			case "Reason":
				if r, ok := c.str(kv.Value); ok {
					*reasons = append(*reasons, want{tick(r), where + " Reply literal in " + s.dir})
				}
			}
		}
		return true
	})
}

func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return exprText(x.X)
	case *ast.UnaryExpr:
		return exprText(x.X)
	}
	return ""
}

// TestDocsManifestRefusals: every refusal of the held manifest — its rule
// (R2…R12, shape) and the fixed words of its message — is in
// docs/manifest.md.
func TestDocsManifestRefusals(t *testing.T) {
	c := consts{}
	src := parseDir(t, "controlplane/internal/manifest")
	c.add("manifest", src)
	p := readPage(t, "manifest.md")
	var rules, texts []want
	src.each(func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			switch name := callName(x); {
			case name == "add" && len(x.Args) >= 3:
				rule, _ := c.str(x.Args[1])
				rules = append(rules, want{tick(rule), "manifest add"})
				if f, ok := c.str(x.Args[2]); ok {
					for _, s := range formatPieces(f) {
						texts = append(texts, want{s, "manifest " + rule})
					}
				}
			case (name == "New" || name == "Errorf" || name == "Sprintf") && len(x.Args) >= 1:
				if pkg, ok := x.Fun.(*ast.SelectorExpr); ok && (exprText(pkg.X) == "errors" || exprText(pkg.X) == "fmt") {
					if f, ok := c.str(x.Args[0]); ok {
						for _, s := range formatPieces(f) {
							texts = append(texts, want{s, "manifest " + name})
						}
					}
				}
			}
		case *ast.FuncDecl:
			// Target and PathPrefix return the R5 and R12 message itself.
			if x.Name.Name != "Target" && x.Name.Name != "PathPrefix" {
				return true
			}
			ast.Inspect(x.Body, func(n ast.Node) bool {
				r, ok := n.(*ast.ReturnStmt)
				if !ok {
					return true
				}
				for _, res := range r.Results {
					for _, s := range c.pieces(res) {
						texts = append(texts, want{s, "manifest." + x.Name.Name})
					}
				}
				return true
			})
		}
		return true
	})
	check(t, p, "rule", rules)
	check(t, p, "message", texts)
}

// TestDocsConfigRefusals: every refusal of custodian.json and of a value
// file, and every field of custodian.json, is in docs/custodian-json.md.
func TestDocsConfigRefusals(t *testing.T) {
	c := consts{}
	src := parseDir(t, "filter")
	c.add("filter", src)
	p := readPage(t, "custodian-json.md")
	var texts []want
	vsrc := parseDir(t, "internal/valuedir")
	c.add("valuedir", vsrc)
	refusals := func(n ast.Node) bool {
		x, ok := n.(*ast.CallExpr)
		if !ok || len(x.Args) == 0 {
			return true
		}
		if pkg, ok := x.Fun.(*ast.SelectorExpr); ok && (exprText(pkg.X) == "errors" || exprText(pkg.X) == "fmt") && (pkg.Sel.Name == "New" || pkg.Sel.Name == "Errorf") {
			if f, ok := c.str(x.Args[0]); ok {
				for _, s := range formatPieces(f) {
					texts = append(texts, want{s, "filter " + pkg.Sel.Name})
				}
			}
		}
		return true
	}
	src.only("config.go", "values.go").each(refusals)
	vsrc.only("values.go").each(refusals) // the value directory's rules, every holder's
	check(t, p, "refusal", texts)
	var fields []want
	for _, v := range []any{filter.Config{}, filter.Listeners{}, filter.SecretConfig{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, want{tick(tag), rt.Name() + "." + rt.Field(i).Name})
		}
	}
	check(t, p, "field", fields)
	check(t, p, "default", []want{
		{tick(filter.DefaultControl), "filter.DefaultControl"},
		{tick(filter.DefaultEgress), "filter.DefaultEgress"},
		{tick(filter.DefaultHealth), "filter.DefaultHealth"},
		{tick(contract.TokenName), "contract.TokenName"},
	})
}

// TestDocsHarnessEnv: docs/harness-env.md lists every proxy and trust
// variable R2 refuses (contract.ProxyTrustVars) and every variable render
// writes.
func TestDocsHarnessEnv(t *testing.T) {
	p := readPage(t, "harness-env.md")
	var ws []want
	for _, v := range contract.ProxyTrustVars {
		w := v
		if rest, ok := strings.CutPrefix(v, "CLOUDSDK_PROXY"); ok && rest != "_TYPE" {
			w = rest // the table writes CLOUDSDK_PROXY_TYPE, _ADDRESS, _PORT, …
		}
		ws = append(ws, want{tick(w), "contract.ProxyTrustVars"})
	}
	for _, v := range contract.ProxyTrustPrefixes {
		ws = append(ws, want{strings.TrimSuffix(v, "_"), "contract.ProxyTrustPrefixes"})
	}
	c := consts{}
	parseDir(t, "controlplane/internal/render").only("render.go").each(func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if ok && callName(call) == "line" && len(call.Args) == 2 {
			if v, ok := c.str(call.Args[0]); ok {
				ws = append(ws, want{tick(v), "render.HarnessEnv"})
			}
		}
		return true
	})
	check(t, p, "variable", ws)
}

// TestDocsEffectorWire: every env variable, header, effector.json and start
// field, state, outcome kind and route answer of the Effector is in
// docs/effector.md.
func TestDocsEffectorWire(t *testing.T) {
	// The push kind has a page of its own; what it adds may be there.
	p := readPage(t, "effector.md")
	if _, err := os.Stat(filepath.Join(root(t), "docs", "effector-push.md")); err == nil {
		push := readPage(t, "effector-push.md")
		p = page{name: "effector.md or effector-push.md", raw: p.raw + push.raw, flat: p.flat + " " + push.flat}
	}
	c := consts{}
	cfg := parseDir(t, "effector/internal/config")
	wsrc := parseDir(t, "effector/internal/wire")
	c.add("config", cfg)
	c.add("wire", wsrc)
	var env, headers, fields, words, texts []want
	for name, v := range c {
		switch {
		case strings.HasPrefix(name, "config.Env"):
			env = append(env, want{tick(v), name})
		case strings.HasPrefix(name, "wire.Header"):
			headers = append(headers, want{tick(v), name})
		case strings.HasPrefix(name, "wire.Outcome"), strings.HasPrefix(name, "wire.State"),
			strings.HasPrefix(name, "wire.Kind"), strings.HasPrefix(name, "wire.Auth"):
			words = append(words, want{tick(v), name})
		}
	}
	// Field names: every key a strict decoder admits.
	for _, s := range []source{cfg, wsrc} {
		s.each(func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || callName(call) != "DecodeObject" || len(call.Args) < 3 {
				return true
			}
			for _, a := range call.Args[2:] {
				if f, ok := c.str(a); ok {
					fields = append(fields, want{tick(f), s.dir + " DecodeObject"})
				}
			}
			return true
		})
	}
	// The server's own answers and the headers it sets.
	parseDir(t, "effector/internal/server").each(func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		switch callName(call) {
		case "fail", "Sprintf":
			if f, ok := c.str(call.Args[len(call.Args)-1]); ok && callName(call) == "fail" {
				for _, s := range formatPieces(f) {
					texts = append(texts, want{s, "server.fail"})
				}
			}
			if f, ok := c.str(call.Args[0]); ok && callName(call) == "Sprintf" {
				for _, s := range formatPieces(f) {
					texts = append(texts, want{s, "server Sprintf"})
				}
			}
		case "Set":
			if h, ok := c.str(call.Args[0]); ok {
				headers = append(headers, want{tick(h), "server Set"})
			}
		}
		return true
	})
	checkEach(t, p, map[string][]want{"env variable": env, "header": headers, "field": fields, "word": words, "answer": texts})
}

// checkEach is check of each named list, in name order.
func checkEach(t *testing.T, p page, lists map[string][]want) {
	t.Helper()
	for _, kind := range sortedKeys(lists) {
		check(t, p, kind, lists[kind])
	}
}

// TestDocsLogContracts: every event word, action, reason word and field a
// jr2.custodian or jr2.effector line can carry is in docs/logs.md.
func TestDocsLogContracts(t *testing.T) {
	p := readPage(t, "logs.md")
	c := consts{}
	srcs := map[string]source{}
	for _, d := range goDirs(t) {
		s := parseDir(t, d)
		srcs[d] = s
		c.add(filepath.Base(d), s)
	}
	// Reasons a line takes from a variable: the engine's and the stream
	// machine's Reason constants, the Reply literals, and the words passed
	// to the helpers that log them.
	var actions, reasons, keys, events []want
	addReason := func(e ast.Expr, where string) {
		if v, ok := c.str(e); ok {
			reasons = append(reasons, want{tick(v), where})
		}
	}
	for name, v := range c {
		if base := name[strings.LastIndexByte(name, '.')+1:]; strings.HasPrefix(base, "Reason") && (strings.HasPrefix(name, "filter.") || strings.HasPrefix(name, "stream.")) {
			reasons = append(reasons, want{tick(v), name})
		}
	}
	pair := regexp.MustCompile(`(action|reason)=([a-z][a-z-]*)`)
	fieldLit := regexp.MustCompile(`^ [a-z]+=$`)
	for _, d := range sortedKeys(srcs) {
		s := srcs[d]
		s.each(func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				switch name := callName(x); {
				case name == "Log" || name == "Format" || name == "Event":
					args := x.Args
					if name == "Format" || name == "Event" && exprText(x.Fun) == "logline.Event" {
						args = args[1:] // the prefix
					}
					if name == "Event" && len(args) > 0 {
						if w, ok := c.str(args[0]); ok {
							events = append(events, want{" " + w + " ", d + " Event"})
						}
						args = args[1:]
					}
					for _, a := range args {
						// append(e.ReadyFields(), "control", c, …)
						if ap, ok := a.(*ast.CallExpr); ok && callName(ap) == "append" && len(ap.Args) > 1 {
							pairs(ap.Args[1:], c, d, &actions, &reasons, &keys)
						}
					}
					pairs(args, c, d, &actions, &reasons, &keys)
				case name == "refuseLog" && len(x.Args) == 2:
					addReason(x.Args[1], d+" refuseLog")
				case name == "exit" && len(x.Args) == 2 && d == "effector/internal/serve":
					addReason(x.Args[0], d+" exit")
				}
			case *ast.CompositeLit:
				if at, ok := x.Type.(*ast.ArrayType); ok && exprText(at.Elt) == "string" {
					if len(x.Elts) > 0 {
						if v, ok := c.str(x.Elts[0]); ok && v == "action" {
							pairs(x.Elts, c, d, &actions, &reasons, &keys)
						}
					}
				}
				if tn := exprText(x.Type); tn == "filter.Reply" || tn == "Reply" {
					for _, e := range x.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && exprText(kv.Key) == "Reason" {
							addReason(kv.Value, d+" Reply literal")
						}
					}
				}
				if exprText(x.Type) == "misconfig" && len(x.Elts) == 2 {
					addReason(x.Elts[0], d+" misconfig")
				}
			case *ast.ValueSpec:
				// relay's table of net/http's lines and their words.
				for i, name := range x.Names {
					if name.Name == "errorReasons" && i < len(x.Values) {
						ast.Inspect(x.Values[i], func(n ast.Node) bool {
							if cl, ok := n.(*ast.CompositeLit); ok && len(cl.Elts) == 2 {
								addReason(cl.Elts[1], d+" errorReasons")
							}
							return true
						})
					}
				}
			case *ast.FuncDecl:
				if x.Name.Name == "ReadyFields" {
					ast.Inspect(x.Body, func(n ast.Node) bool {
						if cl, ok := n.(*ast.CompositeLit); ok {
							pairs(cl.Elts, c, d, &actions, &reasons, &keys)
						}
						return true
					})
				}
				if x.Name.Name == "errorReason" {
					ast.Inspect(x.Body, func(n ast.Node) bool {
						if r, ok := n.(*ast.ReturnStmt); ok {
							addReason(r.Results[0], d+" errorReason")
						}
						return true
					})
				}
			case *ast.BasicLit:
				// Lines written whole (Envoy's access log, a format string),
				// and a field a line appends itself (" error=").
				v, ok := c.str(x)
				if ok && fieldLit.MatchString(v) {
					keys = append(keys, want{strings.TrimSpace(v), d + " literal field"})
				}
				if ok && (strings.Contains(v, "jr2.") || pair.MatchString(strings.TrimSpace(v)) && strings.HasPrefix(strings.TrimSpace(v), pair.FindString(strings.TrimSpace(v)))) {
					for _, m := range pair.FindAllStringSubmatch(v, -1) {
						if m[1] == "action" {
							actions = append(actions, want{"action=" + m[2], d + " literal line"})
						} else {
							reasons = append(reasons, want{tick(m[2]), d + " literal line"})
						}
					}
				}
			}
			return true
		})
	}
	check(t, p, "event", events)
	check(t, p, "action", actions)
	check(t, p, "reason word", reasons)
	check(t, p, "field", keys)
}

// pairs reads key, value, key, value… of a log call: each key's name is a
// field; the value of action and reason, when the code fixes it, a word.
func pairs(args []ast.Expr, c consts, where string, actions, reasons, keys *[]want) {
	for i := 0; i+1 < len(args); i += 2 {
		k, ok := c.str(args[i])
		if !ok {
			continue
		}
		*keys = append(*keys, want{k + "=", where})
		v, ok := c.str(args[i+1])
		if !ok {
			continue
		}
		switch k {
		case "action":
			*actions = append(*actions, want{"action=" + v, where})
		case "reason":
			*reasons = append(*reasons, want{tick(v), where})
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestDocsContainedRun: every bundle record kind and record field, every
// verdict, every policy refusal and every mediator answer is in
// docs/run.md.
func TestDocsContainedRun(t *testing.T) {
	p := readPage(t, "run.md")
	c := consts{}
	bsrc := parseDir(t, "internal/bundle")
	c.add("bundle", bsrc)
	c.add("filter", parseDir(t, "filter"))
	psrc := parseDir(t, "custodian/internal/policy")
	c.add("policy", psrc)
	msrc := parseDir(t, "custodian/internal/mediator")
	c.add("mediator", msrc)
	var kinds, fields, verdicts, texts, reasons []want
	for name, v := range c {
		if strings.HasPrefix(name, "bundle.Kind") {
			kinds = append(kinds, want{tick(v), name})
		}
	}
	bsrc.only("verify.go").each(func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok {
			if v, ok := c.str(lit); ok && regexp.MustCompile(`^(VERIFIED|TRUNCATED|TAMPERED)`).MatchString(v) {
				for _, s := range formatPieces(v) {
					verdicts = append(verdicts, want{s, "bundle verdict"})
				}
			}
		}
		return true
	})
	tags := func(s source) {
		s.each(func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, f := range st.Fields.List {
				if f.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(f.Tag.Value)
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name != "" && name != "-" {
					fields = append(fields, want{tick(name), s.dir + " record field"})
				}
			}
			return true
		})
	}
	tags(msrc.only("records.go"))
	tags(parseDir(t, "custodian/internal/run").only("run.go"))
	psrc.each(func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if callName(call) == "fail" && len(call.Args) >= 2 {
			if f, ok := c.str(call.Args[1]); ok {
				for _, s := range formatPieces(f) {
					texts = append(texts, want{s, "policy fail"})
				}
			}
		}
		return true
	})
	replyLiterals(msrc, c, "mediator", &texts, &reasons)
	for name, v := range c {
		if strings.HasPrefix(name, "mediator.rule") || name == "policy.DenyRule" {
			reasons = append(reasons, want{tick(v), name})
		}
	}
	checkEach(t, p, map[string][]want{"record kind": kinds, "record field": fields, "verdict": verdicts, "policy refusal": texts, "rule or reason": reasons})
}

// TestDocsFlags: every flag of controlplane and custodian's commands is
// named in docs/ as --flag.
func TestDocsFlags(t *testing.T) {
	var all strings.Builder
	entries, _ := os.ReadDir(filepath.Join(root(t), "docs"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") {
			all.WriteString(readPage(t, e.Name()).flat)
		}
	}
	p := page{name: "*.md", flat: all.String()}
	var flags []want
	c := consts{}
	for _, d := range []string{"controlplane/internal/cli", "custodian/internal/serve", "custodian/internal/run"} {
		parseDir(t, d).each(func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			i := -1
			switch callName(call) {
			case "String", "Bool", "Int", "Duration":
				i = 0
			case "StringVar", "BoolVar", "IntVar", "DurationVar":
				i = 1
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); i >= 0 && ok && exprText(sel.X) == "fs" && len(call.Args) > i {
				if f, ok := c.str(call.Args[i]); ok {
					flags = append(flags, want{"--" + f, d})
				}
			}
			return true
		})
	}
	check(t, p, "flag", flags)
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	testName = regexp.MustCompile(`\b(Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)
)

// markdown lists docs/*.md and the top-level README.md.
func markdown(t *testing.T) []string {
	r := root(t)
	files := []string{filepath.Join(r, "README.md")}
	m, _ := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	return append(files, m...)
}

// TestDocsLinksStayInTheRepository: every link in docs/ and README.md is
// relative, resolves inside the repository and names a file or directory
// that exists; no page of docs/ points at ../shared.
func TestDocsLinksStayInTheRepository(t *testing.T) {
	r := root(t)
	for _, f := range markdown(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(r, f)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.HasPrefix(link, "#") {
				continue
			}
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") || strings.HasPrefix(link, "/") {
				t.Errorf("%s: link %q points outside the repository; a clone must hold what it links", rel, link)
				continue
			}
			target, _, _ := strings.Cut(link, "#")
			abs := filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
			if inside, _ := filepath.Rel(r, abs); inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository", rel, link)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s: link %q names nothing in the repository", rel, link)
			}
		}
		if strings.HasPrefix(rel, "docs") && strings.Contains(string(b), "../shared") {
			t.Errorf("%s names ../shared, which a clone does not have", rel)
		}
	}
}

// TestDocsIndexAndTests: docs/README.md links every page; every page names
// at least one test, and every test a page names exists.
func TestDocsIndexAndTests(t *testing.T) {
	r := root(t)
	exists := map[string]bool{}
	walkSource(t, r, func(p string) {
		if strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`).FindAllStringSubmatch(string(b), -1) {
				exists[m[1]] = true
			}
		}
	})
	index := readPage(t, "README.md")
	pages, _ := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	for _, f := range pages {
		name := filepath.Base(f)
		if name == "README.md" {
			continue
		}
		if !strings.Contains(index.raw, "("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
		p := readPage(t, name)
		named := testName.FindAllString(p.raw, -1)
		if len(named) == 0 {
			t.Errorf("docs/%s names no test that pins it", name)
		}
		for _, n := range named {
			if !exists[n] {
				t.Errorf("docs/%s names %s, which no test file defines", name, n)
			}
		}
	}
}

var fileMark = regexp.MustCompile("(?s)<!-- file: ([^ ]+) -->\\s*```[a-z]*\n(.*?)```")

// TestDocsExamplesAreTheFiles: a code block a page marks with
// <!-- file: PATH --> is the file at PATH (from the repository root), so a
// golden fixture or a refusal case quoted in docs/ cannot go stale.
func TestDocsExamplesAreTheFiles(t *testing.T) {
	r := root(t)
	n := 0
	for _, f := range markdown(t) {
		b, _ := os.ReadFile(f)
		for _, m := range fileMark.FindAllStringSubmatch(string(b), -1) {
			n++
			want, err := os.ReadFile(filepath.Join(r, filepath.FromSlash(m[1])))
			if err != nil {
				t.Errorf("%s: example of %s: %v", filepath.Base(f), m[1], err)
				continue
			}
			if strings.TrimRight(string(want), "\n") != strings.TrimRight(m[2], "\n") {
				t.Errorf("%s: the example of %s is not that file's text; copy it again", filepath.Base(f), m[1])
			}
		}
	}
	if n == 0 {
		t.Error("no page quotes a file; the examples check checks nothing")
	}
}

// repoPath is a backquoted name that starts with one of the repository's
// own top-level directories and so reads as a path in it.
var repoPath = regexp.MustCompile("`((?:controlplane|custodian|demo|docs|e2e|effector|envoy|examples|filter|images|internal|scripts|tools)/[A-Za-z0-9_./-]*)`")

// TestDocsPathsExist: a path of the repository a page (docs/, the README
// and each directory's README) names in backquotes names a file or
// directory that exists, so a package that moved is not left named where
// it was. A directory's README may name a path from its own directory.
func TestDocsPathsExist(t *testing.T) {
	r := root(t)
	readmes, _ := filepath.Glob(filepath.Join(r, "*", "README.md"))
	for _, f := range append(markdown(t), readmes...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(r, f)
		for _, m := range repoPath.FindAllStringSubmatch(string(b), -1) {
			p := strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/")
			_, errHere := os.Stat(filepath.Join(filepath.Dir(f), filepath.FromSlash(p)))
			if _, err := os.Stat(filepath.Join(r, filepath.FromSlash(p))); err != nil && errHere != nil {
				t.Errorf("%s names `%s`, which is not in the repository; name where it is now", rel, m[1])
			}
		}
	}
}
