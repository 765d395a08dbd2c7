package strictjson

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// doc is a config shape with every kind of member Decode walks.
type doc struct {
	Pod     string            `json:"pod"`
	Count   int               `json:"count,omitempty"`
	Secrets []secret          `json:"secrets"`
	Labels  map[string]string `json:"labels,omitempty"`
	Extra   json.RawMessage   `json:"extra,omitempty"`
	Any     any               `json:"any,omitempty"`
	Next    *doc              `json:"next,omitempty"`
	Skipped string            `json:"-"`
	embedded
}

type embedded struct {
	Mode string `json:"mode,omitempty"`
}

type secret struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
}

// TestDecodeRefuses: each testdata/decode/NAME.json is refused with
// exactly the message in NAME.want; each ok-NAME.json is read as
// encoding/json reads it.
func TestDecodeRefuses(t *testing.T) {
	files, err := filepath.Glob("testdata/decode/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var got doc
			derr := Decode(b, &got, "test.json", "; write it as the docs say")
			if strings.HasPrefix(name, "ok-") {
				if derr != nil {
					t.Fatalf("refused: %v", derr)
				}
				var want doc
				if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("read %+v, encoding/json reads %+v (%v)", got, want, err)
				}
				return
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			if derr == nil {
				t.Fatal("accepted")
			}
			var fe *FieldError
			if !errors.As(derr, &fe) {
				t.Errorf("%T is not a *FieldError", derr)
			}
			if g, w := derr.Error(), strings.TrimSpace(string(want)); g != w {
				t.Errorf("error\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

// FuzzDecode: Decode never panics; what it reads, encoding/json reads the
// same; a document with a key given twice anywhere is never read.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"pod":"p","secrets":[{"name":"A","hosts":["h"]}]}`,
		`{"pod":"p","pod":"q"}`, `{"POD":"p"}`, `{"labels":{"a":"1","a":"2"}}`,
		`{"extra":{"x":1,"x":2}}`, `{"any":[{"k":1,"k":1}]}`, `{"next":{"next":{"Pod":"x"}}}`,
		`{"mode":"m","Skipped":"s"}`, `[]`, `{"count":1.5}`, `{} {}`, `{"secrets":[{"hosts":[1]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got doc
		err := Decode(b, &got, "fuzz", "")
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%q: %T is not a *FieldError", b, err)
			}
			return
		}
		if raw, derr := Document(b); derr != nil || NoDuplicateKeys("", raw) != nil {
			t.Fatalf("%q: read a document that is not one value free of repeated keys", b)
		}
		var want doc
		if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read %+v, encoding/json reads %+v (%v)", b, got, want, err)
		}
	})
}
