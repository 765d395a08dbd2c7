package streamtest

import (
	"encoding/binary"
	"strings"
	"testing"

	"jr2.dev/boundary/filter"
	"jr2.dev/boundary/filter/pluginconf"
)

// wsFrame is one unmasked (upstream) frame.
func wsFrame(fin bool, op byte, payload string) string {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var b []byte
	switch n := len(payload); {
	case n < 126:
		b = []byte{b0, byte(n)}
	default:
		b = []byte{b0, 126, byte(n >> 8), byte(n)}
	}
	return string(b) + payload
}

func wsClose(code uint16, reason string) string {
	return string(binary.BigEndian.AppendUint16(nil, code)) + reason
}

// webSocket: a WebSocket through the adapter. An upgrade toward a bound
// target is judged by rules 1-11 and forwarded without
// sec-websocket-extensions; the 101's headers are scrubbed; the
// upgraded bytes (body data to the filter) pass through the frame
// scrubber across frame and chunk borders; a 101 selecting an extension
// is the 502; a masked upstream frame passes the Custodian's close frame
// and nothing after; any other upgrade, and one on the control listener,
// is the engine's 400.
func (s suite) webSocket(t *testing.T) {
	const label = "[secret:ANTHROPIC_API_KEY]"
	up := anthropicReq("GET", "/v1/realtime", "upgrade", "websocket", "connection", "Upgrade", "sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==",
		"sec-websocket-version", "13", "sec-websocket-extensions", "permessage-deflate", "x-api-key", AnthropicStandIn)
	t.Run("an upgrade is swapped and every frame scrubbed", func(t *testing.T) {
		frames := wsFrame(true, 1, "text:"+AnthropicValue) + wsFrame(false, 2, "bin:"+AnthropicValue[:7]) +
			wsFrame(true, 9, "ping") + wsFrame(true, 0, AnthropicValue[7:]) + wsFrame(true, 8, wsClose(1000, "bye "+AnthropicValue))
		e := exchange(t, s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic), up,
			&Answer{Status: "101", Headers: H("upgrade", "websocket", "connection", "Upgrade", "sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "x-echo", AnthropicValue), Chunks: Split(frames, 7)})
		if get(e.Forwarded, "x-api-key") != AnthropicValue || get(e.Forwarded, "sec-websocket-extensions") != "" || get(e.Forwarded, "upgrade") != "websocket" {
			t.Fatalf("forwarded:\n%s", Lines(e.Forwarded))
		}
		if e.Status != 101 || get(e.Headers, "x-echo") != label {
			t.Fatalf("the 101: %d\n%s", e.Status, Lines(e.Headers))
		}
		want := wsFrame(true, 1, "text:"+label) + wsFrame(true, 9, "ping") + wsFrame(true, 2, "bin:"+label) + wsFrame(true, 8, wsClose(1000, "bye "+label))
		if got := e.Body(); got != want {
			t.Fatalf("frames out %q, want %q", got, want)
		}
		if len(e.Logs) != 1 || e.Logs[0] != anthropicLine("GET", 101) {
			t.Fatalf("logs %q", e.Logs)
		}
	})
	t.Run("a 101 selecting permessage-deflate is the 502", func(t *testing.T) {
		e := exchange(t, s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic), up,
			&Answer{Status: "101", Headers: H("upgrade", "websocket", "sec-websocket-extensions", "permessage-deflate"), Chunks: []string{wsFrame(true, 1, AnthropicValue)}})
		if e.Local == nil || e.Status != 502 || e.Local.Body != "jr2 custodian: "+Anthropic+" answered the upgrade with a WebSocket extension, which the Custodian cannot read to scrub; the connection was closed" || !e.Dropped {
			t.Fatalf("%d %+v dropped %v", e.Status, e.Local, e.Dropped)
		}
	})
	t.Run("a masked upstream frame closes with 1002 and passes nothing after", func(t *testing.T) {
		st := s.pod.Stream(t, pluginconf.RoleIntercept, Anthropic)
		defer st.Destroy()
		if _, stop := st.RequestHeaders(append([]filter.Header(nil), up...)); stop {
			t.Fatal("refused")
		}
		if _, stop := st.ResponseHeaders(H(":status", "101", "upgrade", "websocket"), false); stop {
			t.Fatal("the 101 stopped")
		}
		out1, _ := st.ResponseData([]byte(wsFrame(true, 1, "ok")), false)
		masked := string([]byte{0x81, 0x80 | byte(len(AnthropicValue)), 1, 2, 3, 4}) + AnthropicValue
		out2, _ := st.ResponseData([]byte(masked), false)
		out3, _ := st.ResponseData([]byte(wsFrame(true, 1, AnthropicValue)), false)
		want := wsFrame(true, 1, "ok") + wsFrame(true, 8, wsClose(1002, filter.ClosedText))
		if got := string(out1) + string(out2); got != want || len(out3) != 0 {
			t.Fatalf("out %q then %q", got, out3)
		}
	})
	decode(t, s.pod, pluginconf.RoleIntercept, Anthropic, Anthropic, []decodeCase{
		{
			name:   "an h2c upgrade is the 400",
			req:    anthropicReq("GET", "/v1/x", "upgrade", "h2c", "x-api-key", AnthropicStandIn),
			status: 400, reason: filter.ReasonUpgrade, body: "jr2 custodian: " + filter.UpgradeText,
		},
		{
			name:   "an upgrade with a body is the 400",
			req:    anthropicReq("GET", "/v1/x", "upgrade", "websocket", "content-length", "5", "x-api-key", AnthropicStandIn),
			status: 400, reason: filter.ReasonUpgrade, body: "jr2 custodian: " + filter.UpgradeText,
		},
	})
	decode(t, s.pod, pluginconf.RoleControl, "", Orchestrator, []decodeCase{
		{
			name: "any upgrade on the control listener is the 400",
			req: H(":method", "GET", ":authority", "127.0.0.1:8081", ":path", "/agents/a1/surface", "upgrade", "websocket",
				"authorization", bearer(TokenStandIn)),
			status: 400, reason: filter.ReasonUpgrade, body: "jr2 custodian: " + filter.ControlUpgradeText,
		},
	})
	if strings.Contains(filter.ClosedText, AnthropicValue) {
		t.Fatal("unreachable")
	}
}
