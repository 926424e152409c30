package cluster

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// meta is the metadata every node gossips about itself. Keys are one letter because memberlist
// limits metadata to memberlist.MetaMaxSize (512) bytes.
type meta struct {
	Cluster string `json:"c"`
	Name    string `json:"n,omitempty"`
	HTTP    string `json:"h,omitempty"`
	Version string `json:"v,omitempty"`
	// TLS says the node is in a cluster with mutual TLS (Config.ClientTLS): its streams and HTTP
	// API are TLS only. Nodes refuse peers whose TLS differs from their own.
	TLS bool `json:"s,omitempty"`
	// Leaving is set by Leave just before memberlist's goodbye, so that peers can tell a node
	// that left from one that failed: memberlist's public API reports both as gone alike.
	Leaving bool `json:"l,omitempty"`
}

func (m meta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode node metadata: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("node metadata is %d bytes, more than memberlist's %d: shorten the node name, HTTP address or version",
			len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta parses metadata received from the network.
func decodeMeta(b []byte) (meta, error) {
	var m meta
	if len(b) == 0 {
		return m, errors.New("decode node metadata: empty")
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("decode node metadata: %d bytes, more than %d", len(b), memberlist.MetaMaxSize)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("decode node metadata: %w", err)
	}
	if m.Cluster == "" {
		return meta{}, errors.New("decode node metadata: no cluster name")
	}
	return m, nil
}
