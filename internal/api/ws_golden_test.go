package api

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/testsupport/golden"
)

// wsGoldenRequests are the client messages of TestWSFramesUnchanged, one connection, in order:
// local subscriptions with history (plain and rate), a cluster one (local history and update
// with the node label, each peer's history from the kept chunks, a peer's pushed update), and
// every refusal the protocol has.
var wsGoldenRequests = []string{
	`{"type":"subscribe","id":"h<1>","match":"{metric=~\"big|nan|inf|phase|lvl|odd.*\"}","history":"1m"}`,
	`{"type":"subscribe","id":"r","match":"{metric=~\"small|big\"}","history":"1m","fn":"rate"}`,
	`{"type":"subscribe","id":"c","match":"{metric=~\"m&m|small\"}","history":"1m","scope":"cluster"}`,
	`{"type":"subscribe","id":"e1","match":"{<&"}`,
	`{"type":"subscribe","id":"e2","match":"small","fn":"max"}`,
	`{"type":"subscribe","id":"e3","match":"small","history":"forever"}`,
	`{"type":"subscribe","id":"e4","match":"small","scope":"galaxy"}`,
	`{"type":"publish","id":"e5"}`,
	`{"type":"subscribe","id":` + `"` + strings.Repeat("x", maxIDBytes+1) + `"}`,
	`{"type":`,
	`{"type":"unsubscribe","id":"none"}`,
}

// wsGoldenFrames is how many frames the requests above are answered with.
const wsGoldenFrames = 17

// TestWSFramesUnchanged: the frames of /api/v1/ws (history, update and error, local and
// cluster scope) are byte for byte those of testdata/wire/ws.jsonl, written by this test
// before the WebSocket protocol moved into internal/apiwire (CANTAL_UPDATE_GOLDEN=1 rewrites
// it). Frames are compared sorted: the peers' answers arrive in no fixed order.
func TestWSFramesUnchanged(t *testing.T) {
	ts, now := wireServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 24)
	for _, r := range wsGoldenRequests {
		if err := c.Write(ctx, websocket.MessageText, []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	var frames [][]byte
	for len(frames) < wsGoldenFrames {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v\n%s", len(frames), err, bytes.Join(frames, []byte("\n")))
		}
		frames = append(frames, normalizeTimes(b, now))
	}
	// Nothing more: a late frame would be one the count above leaves out.
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, b, err := c.Read(rctx); err == nil {
		t.Errorf("frame beyond the %d expected: %s", wsGoldenFrames, b)
	}
	rcancel()
	slices.SortFunc(frames, bytes.Compare)
	golden.Check(t, filepath.Join("testdata", "wire", "ws.jsonl"), append(bytes.Join(frames, []byte("\n")), '\n'))
}
