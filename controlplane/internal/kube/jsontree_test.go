package kube_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifesttest"
)

// jsonSeeds are JSON texts of every kind of value, the escapes and
// characters a string may hold, and texts that are not JSON.
var jsonSeeds = []string{
	`{}`, `[]`, `""`, `"a"`, `0`, `-1`, `1.5`, `1e3`, `-0.5E-7`, `true`, `false`, `null`,
	`{"a":1,"b":[true,false,null,{"c":"d"}],"e":{}}`, ` { "a" : [ 1 , 2 ] } `, `{"a":1,"a":2}`,
	`"\n\t\\\"\/\u00e9\ud83d\ude00\u2028"`, `"é😀"`, "\"\xff\"", `"\ud800"`, `[[[[[]]]]]`,
	``, `{`, `}`, `[1,]`, `{"a"}`, `{"a":}`, `{,}`, `"a`, `"\x"`, "\"a\x01b\"", `01`, `-`, `1.`, `.5`, `+1`, `1e`,
	`tru`, `nul`, `[1 2]`, `{"a":1 "b":2}`, `{"a":1}x`, `{1:2}`, `NaN`,
}

// decoded is the tree encoding/json's decoder gives with UseNumber, the
// one the YAML writer read before, and whether it refused the text.
func decoded(b []byte) (any, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// TestJSONTreeIsDecoders: the YAML writer's JSON reader gives the
// decoder's tree for each seed and for every object of a pod of 400
// targets, and refuses what is not JSON.
func TestJSONTreeIsDecoders(t *testing.T) {
	texts := make([][]byte, 0, len(jsonSeeds))
	for _, s := range jsonSeeds {
		texts = append(texts, []byte(s))
	}
	set, err := kube.Build(stubInput(t, manifesttest.Generate(400), kube.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range set.Objects {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, b)
	}
	b, err := json.Marshal(set.Patch)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range append(texts, b) {
		sameTree(t, text)
	}
}

// FuzzJSONTree: any text is read as the decoder reads it, or refused as
// the decoder refuses it.
func FuzzJSONTree(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameTree(t, []byte(s)) })
}

func sameTree(t *testing.T, text []byte) {
	t.Helper()
	want, ok := decoded(text)
	got, err := kube.JSONTree(text)
	switch {
	case !ok && err == nil:
		t.Errorf("%.80q: read as %v; the decoder refuses it", text, got)
	case ok && err != nil:
		t.Errorf("%.80q: %v; the decoder reads it", text, err)
	case ok && !reflect.DeepEqual(got, want):
		t.Errorf("%.80q: read as\n%#v\nwant (the decoder's)\n%#v", text, got, want)
	}
}
