package scrub

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestBytesAgreesWithOracle(t *testing.T) {
	secrets, s, forms, r := rig(t, 3)
	for trial := 0; trial < 300; trial++ {
		text := randomText(r, forms, 50+r.IntN(400))
		want := oracle(secrets, forms, text)
		if got := s.Bytes(text); !bytes.Equal(got, want) {
			t.Fatalf("Bytes(%q)\n got %q\nwant %q", text, got, want)
		}
	}
}

func TestBytesEachFormInContext(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	for _, f := range allForms(secrets) {
		label := "[secret:" + secrets[f.owner].Name + "]"
		for _, wrap := range [][2]string{{"", ""}, {"x ", " y"}, {"data: {\"v\":\"", "\"}\n\n"}} {
			in := wrap[0] + string(f.b) + wrap[1]
			got := s.String(in)
			// The form may be the start of a longer form of the same
			// secret that the surrounding text completes; it must at least
			// leave the surrounding text as it was around one label.
			if !strings.HasPrefix(got, wrap[0]+"[secret:") || !strings.HasSuffix(got, "]"+wrap[1]) && got != wrap[0]+label+wrap[1] {
				t.Errorf("String(%q) = %q", in, got)
			}
			if strings.Contains(got, string(f.b)) {
				t.Errorf("String(%q) = %q still holds the form", in, got)
			}
		}
	}
}

func TestNoFormIsByteIdentical(t *testing.T) {
	s := mustNew(t, fixture())
	r := rand.New(rand.NewPCG(5, 6))
	big := make([]byte, 1<<20)
	words := []string{"the ", "quick ", "brown ", "fox ", "{\"id\": 42, ", "\"name\": \"x\"}", "\n", "data: ", "sk-ant-", "Bearer ", "%20", "\\n"}
	for i := 0; i < len(big); {
		i += copy(big[i:], words[r.IntN(len(words))])
	}
	if got := s.Bytes(big); !bytes.Equal(got, big) {
		t.Fatal("1 MiB of ASCII without a form was changed")
	}
	for trial := 0; trial < 200; trial++ {
		text := make([]byte, r.IntN(2000))
		for i := range text {
			text[i] = byte(r.IntN(256))
		}
		if got := s.Bytes(text); !bytes.Equal(got, text) {
			t.Fatalf("random bytes without a form changed: %q -> %q", text, got)
		}
	}
	if got := s.Bytes(nil); len(got) != 0 {
		t.Fatalf("Bytes(nil) = %q", got)
	}
}

func TestBytesDoesNotModifyOrAlias(t *testing.T) {
	s := mustNew(t, fixture())
	in := []byte("a " + string(valTok) + " b")
	orig := append([]byte{}, in...)
	out := s.Bytes(in)
	if !bytes.Equal(in, orig) {
		t.Fatal("Bytes modified its input")
	}
	clean := []byte("nothing here")
	out = s.Bytes(clean)
	out[0] = 'X'
	if clean[0] != 'n' {
		t.Fatal("Bytes returned its input slice")
	}
}

func TestOverlapsResolveLongestLeftmost(t *testing.T) {
	for _, c := range []struct {
		name    string
		secrets []Secret
		in      string
		want    string
	}{
		{
			name:    "a value that is a prefix of another's",
			secrets: []Secret{{Name: "short", Value: []byte("abcdefgh")}, {Name: "long", Value: []byte("abcdefgh-ijkl")}},
			in:      "x abcdefgh-ijkl y abcdefgh-ij z",
			want:    "x [secret:long] y [secret:short]-ij z",
		},
		{
			name:    "the longer at the same start wins whatever the order",
			secrets: []Secret{{Name: "long", Value: []byte("abcdefgh-ijkl")}, {Name: "short", Value: []byte("abcdefgh")}},
			in:      "abcdefgh-ijklabcdefgh",
			want:    "[secret:long][secret:short]",
		},
		{
			name:    "an earlier start beats a longer later one",
			secrets: []Secret{{Name: "a", Value: []byte("xxabcdefgh")}, {Name: "b", Value: []byte("abcdefgh12345678")}},
			in:      "xxabcdefgh12345678",
			want:    "[secret:a]12345678",
		},
		{
			name:    "a value inside another is replaced with it",
			secrets: []Secret{{Name: "inner", Value: []byte("cdefghij")}, {Name: "outer", Value: []byte("abcdefghijkl")}},
			in:      "abcdefghijkl cdefghij",
			want:    "[secret:outer] [secret:inner]",
		},
		{
			name:    "a match pending while a longer candidate fails",
			secrets: []Secret{{Name: "a", Value: []byte("bcdefghi")}, {Name: "b", Value: []byte("abcdefghijXY")}},
			in:      "abcdefghijXZ",
			want:    "a[secret:a]jXZ",
		},
		{
			name:    "padded beats unpadded base64 at one start",
			secrets: []Secret{{Name: "q", Value: []byte("12345678")}},
			in:      "MTIzNDU2Nzg=",
			want:    "[secret:q]",
		},
		{
			name:    "two secrets with one value: the first named",
			secrets: []Secret{{Name: "first", Value: []byte("same-value")}, {Name: "second", Value: []byte("same-value")}},
			in:      "same-value",
			want:    "[secret:first]",
		},
		{
			name:    "a value that overlaps itself",
			secrets: []Secret{{Name: "a", Value: []byte("aaaaaaaa")}},
			in:      strings.Repeat("a", 20),
			want:    "[secret:a][secret:a]aaaa",
		},
		{
			name:    "a built url holds the value: the url is replaced whole",
			secrets: []Secret{{Name: "t", Value: []byte("tok12345678"), Built: [][]byte{[]byte("https://h.example/v1/tok12345678/x")}}},
			in:      "GET https://h.example/v1/tok12345678/x done",
			want:    "GET [secret:t] done",
		},
		{
			name:    "forms sharing a prefix: hex case variants",
			secrets: []Secret{{Name: "v", Value: []byte("z/z/z/z/")}},
			in:      "z%2Fz%2fz/z/ z%2Fz%2Fz%2Fz%2F",
			want:    "z%2Fz%2fz/z/ [secret:v]",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, c.secrets)
			if got := s.String(c.in); got != c.want {
				t.Fatalf("String(%q) = %q, want %q", c.in, got, c.want)
			}
			for k := 0; k <= len(c.in); k++ {
				if got := string(streamChunks(t, s, []byte(c.in), []int{k}, []byte(c.want))); got != c.want {
					t.Fatalf("split at %d: %q, want %q", k, got, c.want)
				}
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	sentinel := "SENTINEL-value-7f3a"
	for _, c := range []struct {
		name    string
		secrets []Secret
		want    string
	}{
		{"short value", []Secret{{Name: "ok", Value: []byte(sentinel)}, {Name: "tiny", Value: []byte("SENTINE")}},
			"secret tiny: the value is shorter than 8 bytes; a value that short would match ordinary text"},
		{"empty value", []Secret{{Name: "empty"}}, "secret empty: the value is shorter than 8 bytes"},
		{"empty name", []Secret{{Value: []byte(sentinel)}}, "secrets[0]: the name is empty; name each secret"},
		{"bracket in name", []Secret{{Name: "a]b", Value: []byte(sentinel)}}, `secrets[0]: name "a]b": byte 1 is not printable ASCII or is a bracket`},
		{"space in name", []Secret{{Name: "a b", Value: []byte(sentinel)}}, `secrets[0]: name "a b": byte 1`},
		{"label holds a value", []Secret{{Name: "x", Value: []byte("secret:leaky")}, {Name: "leaky", Value: []byte(sentinel)}},
			"secrets[1]: its label would hold a form of a held value; give the secret another name"},
		{"label holds a value in another case", []Secret{{Name: "LEAKY", Value: []byte("secret:leaky")}},
			"secrets[0]: its label would hold a form of a held value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.secrets)
			if err == nil {
				t.Fatalf("New accepted %s", c.name)
			}
			if s != nil {
				t.Error("New returned a Scrubber beside its error")
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %q, want it to start %q", err, c.want)
			}
			for _, sec := range c.secrets {
				if len(sec.Value) >= 4 && strings.Contains(err.Error(), string(sec.Value)) {
					t.Errorf("error %q holds a value", err)
				}
			}
			if strings.Contains(err.Error(), "SENTINE") {
				t.Errorf("error %q holds value bytes", err)
			}
		})
	}
}

func TestShortBuiltIsIgnored(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "x", Value: []byte("long-enough"), Built: [][]byte{[]byte("tiny"), nil}}})
	if got := s.String("a tiny b"); got != "a tiny b" {
		t.Fatalf("a Built string shorter than MinLen was matched: %q", got)
	}
}

func TestEmptyAndNilScrubber(t *testing.T) {
	for _, s := range []*Scrubber{nil, mustNew(t, nil)} {
		in := []byte("anything " + string(valTok))
		if got := s.Bytes(in); !bytes.Equal(got, in) {
			t.Errorf("%v: Bytes changed %q", s, got)
		}
		if got := s.String("x"); got != "x" {
			t.Errorf("String = %q", got)
		}
		if s.Len() != 0 || s.Longest() != 0 || len(s.Names()) != 0 {
			t.Errorf("Len %d, Longest %d, Names %v", s.Len(), s.Longest(), s.Names())
		}
		st := s.NewStream()
		out := st.Write(nil, in)
		if st.Held() != 0 || !bytes.Equal(st.Flush(out), in) {
			t.Error("an empty stream changed or held bytes")
		}
		if got, cut := s.Bound(in, 4); string(got) != "anyt" || !cut {
			t.Errorf("Bound = %q, %v", got, cut)
		}
	}
}

func TestAccessors(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	if got := strings.Join(s.Names(), ","); got != "tok,ascii,uni,ctl,bad,sep" {
		t.Errorf("Names = %s", got)
	}
	distinct := map[string]bool{}
	longest := 0
	for _, f := range allForms(secrets) {
		distinct[string(f.b)] = true
		longest = max(longest, len(f.b))
	}
	if s.Len() != len(distinct) || s.Longest() != longest {
		t.Errorf("Len %d, Longest %d; want %d, %d", s.Len(), s.Longest(), len(distinct), longest)
	}
}

func TestBound(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "k", Value: []byte("0123456789")}})
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"ab 0123456789 cd", 100, "ab [secret:k] cd", false},
		{"ab 0123456789 cd", 16, "ab [secret:k] cd", false},
		{"ab 0123456789 cd", 15, "ab [secret:k] c", true},
		// The value straddles the cut: replaced whole first, and the label
		// that does not fit is left out whole.
		{"ab 0123456789 cd", 6, "ab ", true},
		{"ab 0123456789 cd", 13, "ab [secret:k]", true},
		{"ab 0123456789 cd", 12, "ab ", true},
		{"ab 0123456789 cd", 3, "ab ", true},
		{"ab 0123456789 cd", 0, "", true},
		{"ab 0123456789 cd", -1, "", true},
		// A cut inside a UTF-8 sequence backs off to its start.
		{"é€😀", 1, "", true},
		{"é€😀", 3, "é", true},
		{"é€😀", 5, "é€", true},
		{"é€😀", 8, "é€", true},
		{"é€😀", 9, "é€😀", false},
		// Bytes that are not UTF-8 are cut where asked.
		{"\xff\xfe\xfd", 2, "\xff\xfe", true},
		// A label in the input text is not one of ours to protect.
		{"[secret:zz", 4, "[sec", true},
	} {
		got, cut := s.Bound([]byte(c.in), c.n)
		if string(got) != c.want || cut != c.cut {
			t.Errorf("Bound(%q, %d) = %q, %v; want %q, %v", c.in, c.n, got, cut, c.want, c.cut)
		}
	}
}

// TestSentinelNeverLeaves is the package's security invariant end to end:
// a sentinel value, in every form, through Bytes, String, Bound and streams
// cut at every byte, never reaches an output.
func TestSentinelNeverLeaves(t *testing.T) {
	sentinel := []byte("SENTINEL/+x=&<é>\"\\ 9f8e7d")
	secrets := []Secret{{Name: "sentinel", Value: sentinel, Built: [][]byte{[]byte("Bearer " + string(sentinel))}}}
	s := mustNew(t, secrets)
	forms := allForms(secrets)
	var body []byte
	for _, f := range forms {
		body = append(body, "<<"...)
		body = append(body, f.b...)
	}
	check := func(where string, out []byte) {
		t.Helper()
		for _, f := range forms {
			if bytes.Contains(out, f.b) {
				t.Fatalf("%s: the output holds the form %q", where, f.b)
			}
		}
	}
	check("Bytes", s.Bytes(body))
	check("String", []byte(s.String(string(body))))
	b, _ := s.Bound(body, len(body)/2)
	check("Bound", b)
	for k := 0; k <= len(body); k++ {
		st := s.NewStream()
		out := st.Write(nil, body[:k])
		check("stream first chunk", out)
		out = st.Write(out, body[k:])
		check("stream", st.Flush(out))
	}
}

func TestConcurrentUse(t *testing.T) {
	secrets := fixture()
	s := mustNew(t, secrets)
	forms := allForms(secrets)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 9))
			for i := 0; i < 30; i++ {
				text := randomText(r, forms, 300)
				want := oracle(secrets, forms, text)
				if got := s.Bytes(text); !bytes.Equal(got, want) {
					t.Errorf("concurrent Bytes differs on %q", text)
					return
				}
				st := s.NewStream()
				var out []byte
				for len(text) > 0 {
					k := min(len(text), 1+r.IntN(40))
					out = st.Write(out, text[:k])
					text = text[k:]
				}
				if out = st.Flush(out); !bytes.Equal(out, want) {
					t.Errorf("concurrent stream differs")
					return
				}
			}
		}(uint64(g))
	}
	wg.Wait()
}

// TestBracketValueCanMeetALabel pins the one case New's doc leaves
// outside the claim: a value that holds a bracket, echoed in part right
// before another secret's form, is completed by that form's label.
func TestBracketValueCanMeetALabel(t *testing.T) {
	s := mustNew(t, []Secret{{Name: "a", Value: []byte("hunter2pass[")}, {Name: "b", Value: []byte("0123456789")}})
	out := s.String("hunter2pass0123456789")
	if out != "hunter2pass[secret:b]" {
		t.Fatalf("got %q", out)
	}
	if again := s.String(out); again == out {
		t.Fatal("the assembled form was not found again; the doc's example no longer holds")
	}
}

func TestFolded(t *testing.T) {
	secrets, s, forms, r := rig(t, 13)
	f := s.Folded()
	if f != s.Folded() || f.Folded() != f {
		t.Fatal("Folded is not built once and shared")
	}
	if f.Len() == 0 || f.Len() > s.Len() || f.Longest() != s.Longest() || strings.Join(f.Names(), ",") != strings.Join(s.Names(), ",") {
		t.Fatalf("Folded: Len %d (exact %d), Longest %d", f.Len(), s.Len(), f.Longest())
	}
	// A header name as Go canonicalizes it.
	name := "X-" + strings.ToUpper(string(valTok[:1])) + strings.ToLower(string(valTok[1:]))
	if got := f.String(name); got != "X-[secret:tok]" {
		t.Errorf("Folded().String(%q) = %q", name, got)
	}
	if got := s.String(name); got != name {
		t.Errorf("exact String(%q) = %q: matching is meant to be exact", name, got)
	}
	for trial := 0; trial < 200; trial++ {
		text := randomText(r, forms, 300)
		for i := range text {
			if r.IntN(3) == 0 && text[i] >= 'a' && text[i] <= 'z' {
				text[i] -= 'a' - 'A'
			}
		}
		want := oracleCase(secrets, forms, text, true)
		if got := f.Bytes(text); !bytes.Equal(got, want) {
			t.Fatalf("Folded().Bytes(%q)\n got %q\nwant %q", text, got, want)
		}
		if got := streamChunks(t, f, text, randomCuts(r, len(text), 5), want); !bytes.Equal(got, want) {
			t.Fatalf("folded stream: %q, want %q", got, want)
		}
	}
	if (*Scrubber)(nil).Folded() != nil {
		t.Error("Folded of nil is not nil")
	}
}

func TestFoldedConcurrentFirstUse(t *testing.T) {
	s := mustNew(t, fixture())
	var wg sync.WaitGroup
	got := make([]*Scrubber, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.Folded()
		}()
	}
	wg.Wait()
	for _, f := range got {
		if f != got[0] || f == nil {
			t.Fatal("concurrent first use built more than one folded Scrubber")
		}
	}
}

// TestMemoryGrowsWithFormsNotAlphabet holds the automaton to its layout:
// at most rowBudget bytes of rows, and a bounded number of bytes per
// state, with states no more than the forms' total length. 64 secrets of
// 200 random printable bytes (every character an encoder treats apart) with
// an Effector's Built strings stand for the upper end.
func TestMemoryGrowsWithFormsNotAlphabet(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	secrets := make([]Secret, 64)
	total, npats := 0, 0
	for i := range secrets {
		v := make([]byte, 200)
		for k := range v {
			v[k] = byte(' ' + r.IntN(95))
		}
		secrets[i] = Secret{Name: fmt.Sprint("s", i), Value: v, Built: [][]byte{append([]byte("Bearer "), v...)}}
		for _, f := range secretForms(secrets[i]) {
			total += len(f)
			npats++
		}
	}
	s := mustNew(t, secrets)
	if 2*len(s.a.rows) > rowBudget {
		t.Errorf("%d bytes of rows, budget %d", 2*len(s.a.rows), rowBudget)
	}
	if s.a.states() > total+1 {
		t.Errorf("%d states for %d bytes of forms", s.a.states(), total)
	}
	if limit := rowBudget + 19*(total+1) + 8*npats; s.a.size() > limit {
		t.Errorf("automaton takes %d bytes, more than %d", s.a.size(), limit)
	}
	t.Logf("%d forms, %d bytes of forms, %d states, %.1f MiB", s.Len(), total, s.a.states(), float64(s.a.size())/(1<<20))
}

// TestStringNoCopy: a value holding no form costs String no allocation; one
// holding a form is scrubbed.
func TestStringNoCopy(t *testing.T) {
	s, err := New([]Secret{{Name: "K", Value: []byte("sk-live-0123456789abcdef")}})
	if err != nil {
		t.Fatal(err)
	}
	clean := "application/json; charset=utf-8 and a longer value past any lane's stride, " + strings.Repeat("x", 300)
	if n := testing.AllocsPerRun(100, func() { _ = s.String(clean) }); n != 0 {
		t.Errorf("String of a clean value: %v allocations", n)
	}
	if got := s.String("a sk-live-0123456789abcdef b"); got != "a [secret:K] b" {
		t.Errorf("String = %q", got)
	}
	if got := s.String(clean + "sk-live-0123456789abcdef"); !strings.HasSuffix(got, "[secret:K]") {
		t.Errorf("a form at the end of a long value: %q", got)
	}
}
