package relay

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"jr2.dev/boundary/filter"
)

// UpgradeOf is what the engine judges of r's upgrade (filter.Upgrade),
// read before the hop-by-hop headers are dropped: each Upgrade value, and
// whether a body comes with the request.
func UpgradeOf(r *http.Request) filter.Upgrade {
	return filter.Upgrade{
		Tokens: r.Header.Values("Upgrade"),
		Body:   r.ContentLength != 0 || len(r.TransferEncoding) > 0,
	}
}

// Dial opens a new upstream connection (TLS verified as the Pool's own),
// never pooled: an upgraded connection is the upgrade's alone.
func (p *Pool) Dial(ctx context.Context) (net.Conn, error) {
	pc, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	return pc.tc, nil
}

// upgradeTimeout bounds the wait for the upstream's answer to an upgrade.
const upgradeTimeout = 30 * time.Second

// WebSocket carries a WebSocket upgrade the engine forwarded
// (filter.Decision.WebSocket) on a connection of its own: out (Outbound's
// request) goes with "Connection: Upgrade" and "Upgrade: websocket"; an
// answer other than 101 is written as Response writes any; a 101 is
// decided by the engine (filter.Engine.DecideSwitch) — refused 502 with
// the upstream's connection closed, or written with its headers scrubbed,
// the client's connection hijacked, and from then on the client's bytes
// piped to the upstream unchanged and the upstream's through the engine's
// frame scrubber (filter.Engine.NewFrames). Malformed upstream framing
// ends both connections after the Custodian's close frame. It returns the
// status the client got (0: nothing was written; failed tells why), for
// the caller's log line.
//
// track, when not nil, registers the taken-over connection with the
// host's graceful stop (which closes it when the grace is over); false
// means the host is stopping, and the connection is closed at once.
// untrack is called when it ends.
//
// hooks, when not nil, see what is carried, for a host that records it
// (the contained run's mediator): Switch the 101's headers as the client
// gets them, Frames each chunk of scrubbed frames before it is written to
// the client, Agent each chunk of the client's bytes before it goes
// upstream. An error from any ends both connections at once.
func WebSocket(e *filter.Engine, w http.ResponseWriter, r *http.Request, out *http.Request, dial func(context.Context) (net.Conn, error), target string, track func(net.Conn) bool, untrack func(net.Conn), hooks *WebSocketHooks) (status int, failed *filter.Reply) {
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", "websocket")
	up, err := dial(r.Context())
	if err != nil {
		return 0, Failure(e, target, false, err)
	}
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	up.SetDeadline(time.Now().Add(upgradeTimeout))
	bw := bufio.NewWriter(up)
	if err := out.Write(bw); err != nil {
		return 0, Failure(e, target, true, err)
	}
	if err := bw.Flush(); err != nil {
		return 0, Failure(e, target, true, err)
	}
	br := bufio.NewReaderSize(up, 16<<10)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		return 0, Failure(e, target, true, err)
	}
	up.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		Response(e, w, target, out.Method, resp, &status, nil)
		return status, nil
	}
	var headers []filter.Header
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			headers = append(headers, filter.Header{Name: k, Value: v})
		}
	}
	rd := e.DecideSwitch(target, headers)
	if rd.Reply != nil {
		// The agent's connection closes after the 502 too: it asked to
		// leave HTTP, and nothing of the upstream's frames follows.
		h := w.Header()
		for k := range h {
			delete(h, k)
		}
		h.Set("Connection", "close")
		WriteReplyKeep(w, rd.Reply)
		return rd.Reply.Status, nil
	}
	h := http.Header{}
	answerHeaders(h, headers, rd)
	for n := range nominated(resp.Header) {
		h.Del(n)
	}
	if hooks == nil {
		hooks = &WebSocketHooks{}
	}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")

	client, crw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		WriteReply(w, e.NoAnswer(target, "the connection could not be taken over for the upgrade"))
		return http.StatusBadGateway, nil
	}
	defer client.Close()
	if track != nil {
		if !track(client) {
			return 0, nil // stopping: closed before the 101
		}
		defer untrack(client)
	}
	client.SetDeadline(time.Time{})
	var head strings.Builder
	head.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	h.Write(&head)
	head.WriteString("\r\n")
	if hooks.Switch != nil && hooks.Switch(h) != nil {
		return 0, nil
	}
	if _, err := io.WriteString(client, head.String()); err != nil {
		return http.StatusSwitchingProtocols, nil
	}
	frames := e.NewFrames()
	defer frames.Close()
	upc := up
	up = nil // closed below, once both directions end
	var once sync.Once
	end := func() { once.Do(func() { client.Close(); upc.Close() }) }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		// The agent's bytes, unchanged (what the server read ahead first).
		defer wg.Done()
		defer end()
		var to io.Writer = upc
		if hooks.Agent != nil {
			to = hookWriter{upc, hooks.Agent}
		}
		io.Copy(to, crw.Reader)
	}()
	buf := make([]byte, 32<<10)
	var scrubbed []byte
	for {
		n, rerr := br.Read(buf)
		if n > 0 {
			var ferr error
			scrubbed, ferr = frames.Write(scrubbed[:0], buf[:n])
			if len(scrubbed) > 0 {
				if hooks.Frames != nil && hooks.Frames(scrubbed) != nil {
					break
				}
				if _, err := client.Write(scrubbed); err != nil {
					break
				}
			}
			if ferr != nil {
				break // malformed: the close frame went, nothing more does
			}
		}
		if rerr != nil {
			break
		}
	}
	end()
	wg.Wait()
	return http.StatusSwitchingProtocols, nil
}

// WebSocketHooks see what WebSocket carries (see there).
type WebSocketHooks struct {
	Switch func(h http.Header) error
	Frames func(p []byte) error
	Agent  func(p []byte) error
}

// hookWriter shows each chunk to see before it goes to w.
type hookWriter struct {
	w   io.Writer
	see func([]byte) error
}

func (h hookWriter) Write(p []byte) (int, error) {
	if err := h.see(p); err != nil {
		return 0, err
	}
	return h.w.Write(p)
}
