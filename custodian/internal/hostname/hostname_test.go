package hostname

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(long63+".", 3) + strings.Repeat("b", 61) // 64*3 + 61 = 253
	for _, tc := range []struct {
		name string
		want error
	}{
		{"example.com", nil},
		{"a", nil},
		{"localhost", nil},
		{"_dmarc.example.com", nil},
		{"x-1.example.com", nil},
		{"1.2.3.example", nil},
		{"1e100.net", nil},
		{long63 + ".com", nil},
		{name253, nil},
		{name253 + "b", ErrTooLong},
		{"", ErrEmpty},
		{"example.com.", ErrEmptyLabel},
		{".example.com", ErrEmptyLabel},
		{"a..b", ErrEmptyLabel},
		{long63 + "a.com", ErrLabelTooLong},
		{"-a.com", ErrHyphen},
		{"a-.com", ErrHyphen},
		{"Example.com", ErrByte},
		{"a b.com", ErrByte},
		{"a*.com", ErrByte},
		{"a\x00.com", ErrByte},
		{"a=b.com", ErrByte},
		{"caf\xc3\xa9.com", ErrByte},
		{"127.0.0.1", ErrNumeric},
		{"127.1", ErrNumeric},
		{"2130706433", ErrNumeric},
		{"0x7f.0.0.1", ErrNumeric},
		{"[::1]", ErrByte},
	} {
		if got := Check(tc.name); !errors.Is(got, tc.want) {
			t.Errorf("Check(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLower(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM": "example.com",
		"plain":       "plain",
		"\xc3\x89X":   "\xc3\x89x", // non-ASCII kept for Check to refuse
	} {
		if got := Lower(in); got != want {
			t.Errorf("Lower(%q) = %q, want %q", in, got, want)
		}
	}
}
