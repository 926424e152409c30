package cluster

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/hashicorp/memberlist"
)

// ParseKeys parses a gossip key file: one key per line, the first being the primary key used to
// encrypt and the others only accepted when decrypting (so keys can be rotated without a
// partition). A key is 16, 24 or 32 bytes (AES-128, -192 or -256) written in standard base64
// (as `head -c 32 /dev/urandom | base64` makes). Blank lines and lines starting with # are
// ignored. The same format serves Consul's and Serf's keys.
func ParseKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		key := make([]byte, base64.StdEncoding.DecodedLen(len(line)))
		n, err := base64.StdEncoding.Decode(key, line)
		if err != nil {
			return nil, fmt.Errorf("gossip key on line %d: not base64: %w", i+1, err)
		}
		key = key[:n]
		if err := memberlist.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("gossip key on line %d: %d bytes, want 16, 24 or 32", i+1, n)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip key file has no key")
	}
	return keys, nil
}

// LoadKeyring reads a key file (see ParseKeys) into a memberlist keyring.
func LoadKeyring(path string) (*memberlist.Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gossip key: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, fmt.Errorf("gossip keyring: %w", err)
	}
	return kr, nil
}
