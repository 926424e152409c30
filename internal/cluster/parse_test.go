package cluster

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseKeys(t *testing.T) {
	data, err := os.ReadFile("testdata/gossip.key")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		t.Fatalf("ParseKeys(testdata/gossip.key): %v", err)
	}
	if len(keys) != 2 || string(keys[0]) != "0123456789abcdef0123456789abcdef" || string(keys[1]) != "fedcba9876543210" {
		t.Errorf("ParseKeys = %q; want the 32-byte primary then the 16-byte key", keys)
	}
	for _, bad := range []string{"", "# only a comment\n", "not base64!\n", "c2hvcnQ=\n"} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%q) succeeded", bad)
		}
	}
	if _, err := LoadKeyring("testdata/gossip.key"); err != nil {
		t.Errorf("LoadKeyring: %v", err)
	}
}

func TestParsePeersState(t *testing.T) {
	data, err := os.ReadFile("testdata/peers.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parsePeersState(data)
	if err != nil {
		t.Fatalf("parsePeersState(testdata/peers.json): %v", err)
	}
	if s.Cluster != "prod" || len(s.Seeds) != 2 || len(s.Peers) != 2 || s.Peers[1].Addr != "[fd00::3]:22682" {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range []string{"", "{", `{"version":2,"peers":[]}`, `{"version":1,"peers":[{"id":"x","addr":"nohost"}]}`,
		`{"version":1,"seeds":[""]}`, `[]`} {
		if _, err := parsePeersState([]byte(bad)); err == nil {
			t.Errorf("parsePeersState(%q) succeeded", bad)
		}
	}
	// A round trip through the writer.
	path := filepath.Join(t.TempDir(), "peers.json")
	if err := writePeersState(path, s); err != nil {
		t.Fatal(err)
	}
	back, err := readPeersState(path)
	if err != nil || back.Peers[0] != s.Peers[0] {
		t.Errorf("read back %+v, %v", back, err)
	}
	if empty, err := readPeersState(filepath.Join(t.TempDir(), "none.json")); err != nil || len(empty.Peers) != 0 {
		t.Errorf("missing peers file: %+v, %v; want empty state", empty, err)
	}
}

func TestDecodeMeta(t *testing.T) {
	m := meta{Cluster: "c", Name: "n", HTTP: "10.0.0.1:22682", Version: "1.0"}
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeMeta(b)
	if err != nil || back != m {
		t.Errorf("decodeMeta(encode(%+v)) = %+v, %v", m, back, err)
	}
	for _, bad := range []string{"", "{}", "null", `{"c":1}`, strings.Repeat(" ", 600)} {
		if _, err := decodeMeta([]byte(bad)); err == nil {
			t.Errorf("decodeMeta(%q) succeeded", bad)
		}
	}
}

func TestSuspectLogLine(t *testing.T) {
	var got []string
	l := newMemberlistLogger(testLogger(t), nil, func(s string) { got = append(got, s) })
	l.Printf("[INFO] memberlist: Suspect node-7 has failed, no acks received")
	l.Printf("[DEBUG] memberlist: Failed UDP ping: node-8 (timeout reached)")
	if len(got) != 1 || got[0] != "node-7" {
		t.Errorf("suspects from log = %q; want [node-7]", got)
	}
}

// upgradeResponse runs the client half of the gossip upgrade against a canned server answer.
// With hold, the server end stays open until the client is done with the upgrade.
func upgradeResponse(resp []byte, hold bool) (net.Conn, error) {
	client, server := net.Pipe()
	upgraded := make(chan struct{})
	go func() {
		defer server.Close()
		br := bufio.NewReader(server)
		for { // consume the request head
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		server.Write(resp)
		if hold {
			// net.Pipe (unlike TCP) fails SetDeadline on an end whose peer has closed,
			// which clientUpgrade calls after reading an accepted answer.
			<-upgraded
		}
	}()
	c, err := clientUpgrade(client, "peer:1", time.Now().Add(2*time.Second))
	close(upgraded)
	if err != nil {
		client.Close()
	}
	return c, err
}

func TestClientUpgrade(t *testing.T) {
	c, err := upgradeResponse([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: cantal-gossip\r\nConnection: Upgrade\r\n\r\nhello"), true)
	if err != nil {
		t.Fatalf("clientUpgrade: %v", err)
	}
	b, _ := io.ReadAll(c)
	if string(b) != "hello" {
		t.Errorf("bytes after the upgrade = %q; want hello", b)
	}
	for _, bad := range []string{"", "HTTP/1.1 200 OK\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", "garbage\r\n\r\n"} {
		if _, err := upgradeResponse([]byte(bad), false); err == nil {
			t.Errorf("clientUpgrade accepted %q", bad)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	if b, err := os.ReadFile("testdata/gossip.key"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("c2hvcnQ=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseKeys(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			if n := len(k); n != 16 && n != 24 && n != 32 {
				t.Fatalf("ParseKeys returned a %d-byte key", n)
			}
		}
	})
}

func FuzzParsePeersState(f *testing.F) {
	if b, err := os.ReadFile("testdata/peers.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parsePeersState(data)
		if err != nil {
			return
		}
		for _, p := range s.Peers {
			if _, _, err := net.SplitHostPort(p.Addr); err != nil {
				t.Fatalf("accepted peer address %q", p.Addr)
			}
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	b, _ := meta{Cluster: "c", Name: "n", HTTP: "h:1", Version: "v", Leaving: true}.encode()
	f.Add(b)
	f.Add([]byte(`{"c":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMeta(data)
		if err != nil {
			return
		}
		if m.Cluster == "" {
			t.Fatalf("accepted metadata without a cluster: %q", data)
		}
	})
}

func FuzzClientUpgrade(f *testing.F) {
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: cantal-gossip\r\nConnection: Upgrade\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}"))
	f.Fuzz(func(t *testing.T, resp []byte) {
		c, err := upgradeResponse(resp, false)
		if err != nil {
			return
		}
		if !bytes.Contains(bytes.ToLower(resp), []byte("cantal-gossip")) {
			t.Fatalf("upgrade accepted without the protocol token: %q", resp)
		}
		c.Close()
	})
}
