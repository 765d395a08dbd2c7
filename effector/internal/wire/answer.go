package wire

import (
	"encoding/json"
	"fmt"
	"sort"

	sj "jr2.dev/boundary/internal/strictjson"
)

// States of an effect on one replica.
const (
	StateRunning = "running"
	StateSettled = "settled"
	StateUnknown = "unknown"
)

// Outcome kinds.
const (
	OutcomeResponse    = "response"    // http: the server answered
	OutcomeUnreachable = "unreachable" // http: nothing was sent
	OutcomeRefused     = "refused"     // http: the Effector refused and sent nothing
	OutcomeUnknown     = "unknown"     // http: sent, no answer; command: did not run
	OutcomeExited      = "exited"      // command
	OutcomeTimeout     = "timeout"     // command
	OutcomePushed      = "pushed"      // push
	OutcomeRejected    = "rejected"    // push
)

// Replica names the replica that answers: its pod name and the address it
// verifies signatures with.
type Replica struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// State is the answer to a start, an attach, a poll and a stop.
type State struct {
	State   string
	Replica Replica
	// Outcome is set when State is settled.
	Outcome *Outcome
	// Pinned is the commit a push runs against.
	Pinned string
}

// MarshalJSON writes a state in the pinned member order.
func (s *State) MarshalJSON() ([]byte, error) {
	f := fields{{"state", s.State}, {"replica", s.Replica}}
	if s.Outcome != nil {
		f = append(f, field{"outcome", s.Outcome})
	}
	f = append(f, field{"pinned", opt(s.Pinned)})
	return f.MarshalJSON()
}

// Error is every other answer: 400 with the reason, 405, 503 stopping.
type Error struct {
	Error   string
	Replica Replica
}

// MarshalJSON writes {"error": …, "replica": …}.
func (e *Error) MarshalJSON() ([]byte, error) {
	return fields{{"error", e.Error}, {"replica", e.Replica}}.MarshalJSON()
}

// Outcome is how an effect settled. Which fields are set depends on Kind;
// MarshalJSON writes only the kind's own.
type Outcome struct {
	Kind string

	// response
	Status      int
	Headers     map[string][]string
	ContentType string
	Size        int64
	// Body is set only when the answer is text.
	Body      *string
	Truncated bool

	// unreachable, refused, unknown, timeout, rejected
	Reason string

	// exited, timeout
	Code   *int
	Signal string
	Stdout string
	Stderr string
	Dirty  bool

	// pushed, rejected
	Commit string
	Ref    string
	Stage  string
}

// MarshalJSON writes the kind's members in the pinned order.
func (o *Outcome) MarshalJSON() ([]byte, error) {
	f := fields{{"kind", o.Kind}}
	switch o.Kind {
	case OutcomeResponse:
		h := o.Headers
		if h == nil {
			h = map[string][]string{}
		}
		f = append(f, field{"status", o.Status}, field{"headers", h}, field{"contentType", o.ContentType}, field{"size", o.Size})
		if o.Body != nil {
			f = append(f, field{"body", *o.Body})
		}
		f = append(f, field{"truncated", o.Truncated})
	case OutcomeUnreachable, OutcomeRefused, OutcomeUnknown:
		f = append(f, field{"reason", o.Reason})
	case OutcomeExited:
		if o.Code != nil {
			f = append(f, field{"code", *o.Code})
		}
		f = append(f, field{"signal", opt(o.Signal)}, field{"stdout", o.Stdout}, field{"stderr", o.Stderr},
			field{"truncated", o.Truncated}, field{"dirty", o.Dirty})
	case OutcomeTimeout:
		f = append(f, field{"reason", o.Reason}, field{"stdout", o.Stdout}, field{"stderr", o.Stderr})
	case OutcomePushed:
		f = append(f, field{"commit", o.Commit}, field{"ref", o.Ref})
	case OutcomeRejected:
		f = append(f, field{"stage", o.Stage}, field{"reason", o.Reason})
	default:
		return nil, fmt.Errorf("wire: outcome kind %q has no shape", o.Kind)
	}
	return f.MarshalJSON()
}

// MapStrings replaces every string of o (header names and values
// included) by f of it. Header names that f makes equal are merged.
func (o *Outcome) MapStrings(f func(string) string) {
	o.MapHeaderNames(f)
	for n, vs := range o.Headers {
		for i, v := range vs {
			vs[i] = f(v)
		}
		o.Headers[n] = vs
	}
	if o.Body != nil {
		b := f(*o.Body)
		o.Body = &b
	}
	for _, s := range []*string{&o.Kind, &o.ContentType, &o.Reason, &o.Signal, &o.Stdout, &o.Stderr, &o.Commit, &o.Ref, &o.Stage} {
		*s = f(*s)
	}
}

// MapHeaderNames replaces every header name by f of it; the values of
// names f makes equal are merged, in name order.
func (o *Outcome) MapHeaderNames(f func(string) string) {
	if o.Headers == nil {
		return
	}
	names := make([]string, 0, len(o.Headers))
	for n := range o.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	h := make(map[string][]string, len(o.Headers))
	for _, n := range names {
		m := f(n)
		h[m] = append(h[m], o.Headers[n]...)
	}
	o.Headers = h
}

// DecodeState reads a state answer strictly.
func DecodeState(b []byte) (*State, error) {
	raw, err := sj.Document(b)
	if err != nil {
		return nil, err
	}
	o, err := sj.DecodeObject("", raw, "state", "replica", "outcome", "pinned")
	if err != nil {
		return nil, err
	}
	s := &State{}
	if s.State, _, err = o.Str("state", true); err != nil {
		return nil, err
	}
	if s.Replica, err = decodeReplica(o); err != nil {
		return nil, err
	}
	if s.Pinned, _, err = o.Str("pinned", false); err != nil {
		return nil, err
	}
	v, hasOutcome, err := o.Raw("outcome")
	if err != nil {
		return nil, err
	}
	switch s.State {
	case StateSettled:
		if !hasOutcome {
			return nil, sj.Errorf("outcome", "required with state settled")
		}
		if s.Outcome, err = decodeOutcome("outcome", v); err != nil {
			return nil, err
		}
	case StateRunning, StateUnknown:
		if hasOutcome {
			return nil, sj.Errorf("outcome", "only with state settled")
		}
	default:
		return nil, sj.Errorf("state", "%s is not a state (running, settled, unknown)", sj.Quote(s.State))
	}
	return s, nil
}

// DecodeError reads an error answer strictly.
func DecodeError(b []byte) (*Error, error) {
	raw, err := sj.Document(b)
	if err != nil {
		return nil, err
	}
	o, err := sj.DecodeObject("", raw, "error", "replica")
	if err != nil {
		return nil, err
	}
	e := &Error{}
	if e.Error, _, err = o.Str("error", true); err != nil {
		return nil, err
	}
	if e.Replica, err = decodeReplica(o); err != nil {
		return nil, err
	}
	return e, nil
}

func decodeReplica(parent *sj.Object) (Replica, error) {
	v, ok, err := parent.Raw("replica")
	if err != nil {
		return Replica{}, err
	}
	if !ok {
		return Replica{}, sj.Errorf("replica", "required")
	}
	o, err := sj.DecodeObject("replica", v, "name", "address")
	if err != nil {
		return Replica{}, err
	}
	var r Replica
	if r.Name, _, err = o.Str("name", true); err != nil {
		return Replica{}, err
	}
	if r.Address, _, err = o.Str("address", true); err != nil {
		return Replica{}, err
	}
	return r, nil
}

// outcomeFields lists, per kind, the members it may hold and must hold.
var outcomeFields = map[string]struct{ allowed, required []string }{
	OutcomeResponse:    {[]string{"kind", "status", "headers", "contentType", "size", "body", "truncated"}, []string{"status", "headers", "contentType", "size", "truncated"}},
	OutcomeUnreachable: {[]string{"kind", "reason"}, []string{"reason"}},
	OutcomeRefused:     {[]string{"kind", "reason"}, []string{"reason"}},
	OutcomeUnknown:     {[]string{"kind", "reason"}, []string{"reason"}},
	OutcomeExited:      {[]string{"kind", "code", "signal", "stdout", "stderr", "truncated", "dirty"}, []string{"stdout", "stderr", "truncated", "dirty"}},
	OutcomeTimeout:     {[]string{"kind", "reason", "stdout", "stderr"}, []string{"reason", "stdout", "stderr"}},
	OutcomePushed:      {[]string{"kind", "commit", "ref"}, []string{"commit", "ref"}},
	OutcomeRejected:    {[]string{"kind", "stage", "reason"}, []string{"stage", "reason"}},
}

func decodeOutcome(path string, raw json.RawMessage) (*Outcome, error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(raw, &probe)
	shape, ok := outcomeFields[probe.Kind]
	if !ok {
		return nil, sj.Errorf(sj.Join(path, "kind"), "%s is not an outcome kind", sj.Quote(probe.Kind))
	}
	o, err := sj.DecodeObject(path, raw, shape.allowed...)
	if err != nil {
		return nil, err
	}
	if k, _, err := o.Str("kind", true); err != nil || k != probe.Kind {
		return nil, sj.Errorf(sj.Join(path, "kind"), "want a string")
	}
	for _, key := range shape.required {
		if !o.Has(key) {
			return nil, sj.Errorf(sj.Join(path, key), "required with kind %s", probe.Kind)
		}
	}
	out := &Outcome{Kind: probe.Kind}
	strs := map[string]*string{"contentType": &out.ContentType, "reason": &out.Reason, "signal": &out.Signal,
		"stdout": &out.Stdout, "stderr": &out.Stderr, "commit": &out.Commit, "ref": &out.Ref, "stage": &out.Stage}
	for key, dst := range strs {
		if *dst, _, err = o.Str(key, false); err != nil {
			return nil, err
		}
	}
	bools := map[string]*bool{"truncated": &out.Truncated, "dirty": &out.Dirty}
	for key, dst := range bools {
		if *dst, _, err = o.Bool(key, false); err != nil {
			return nil, err
		}
	}
	if s, _, err := o.Int("status", false, 100, 999); err != nil {
		return nil, err
	} else {
		out.Status = int(s)
	}
	if out.Size, _, err = o.Int("size", false, 0, 1<<62); err != nil {
		return nil, err
	}
	if c, ok, err := o.Int("code", false, -1<<31, 1<<31-1); err != nil {
		return nil, err
	} else if ok {
		code := int(c)
		out.Code = &code
	}
	if b, ok, err := o.Str("body", false); err != nil {
		return nil, err
	} else if ok {
		out.Body = &b
	}
	if v, ok, err := o.Raw("headers"); err != nil {
		return nil, err
	} else if ok {
		if out.Headers, err = decodeHeaderValues(sj.Join(path, "headers"), v); err != nil {
			return nil, err
		}
	}
	if out.Kind == OutcomeExited && out.Code == nil && out.Signal == "" {
		return nil, sj.Errorf(path, "an exited outcome carries code, signal or both; it has neither")
	}
	if out.Kind == OutcomeRejected && !sj.Contains([]string{"start", "sign", "push"}, out.Stage) {
		return nil, sj.Errorf(sj.Join(path, "stage"), "%s is not a stage (start, sign, push)", sj.Quote(out.Stage))
	}
	return out, nil
}

func decodeHeaderValues(path string, raw json.RawMessage) (map[string][]string, error) {
	names, vals, err := sj.Members(path, raw)
	if err != nil {
		return nil, err
	}
	h := make(map[string][]string, len(names))
	for _, n := range names {
		vs, err := sj.Strings(sj.Join(path, n), vals[n])
		if err != nil {
			return nil, err
		}
		h[n] = vs
	}
	return h, nil
}
