package cantalv1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/fxamacker/cbor/v2"
)

// cborMode encodes answers: maps with their keys sorted (the same bytes for the same answer),
// float64 kept as float64 as the original writes them.
var cborMode = func() cbor.EncMode {
	m, err := cbor.EncOptions{Sort: cbor.SortBytewiseLexical}.EncMode()
	if err != nil {
		panic(err) // the options are constant
	}
	return m
}()

func marshalCBOR(v any) ([]byte, error) { return cborMode.Marshal(v) }

// gron writes v as gron (github.com/tomnomnom/gron's statements, which the original's .gron
// routes name): one assignment per value, json = {} first, object keys sorted.
func gron(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	gronValue(&out, "json", tree)
	return out.Bytes(), nil
}

func gronValue(out *bytes.Buffer, path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		fmt.Fprintf(out, "%s = {};\n", path)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gronValue(out, path+gronKey(k), x[k])
		}
	case []any:
		fmt.Fprintf(out, "%s = [];\n", path)
		for i, e := range x {
			gronValue(out, path+"["+strconv.Itoa(i)+"]", e)
		}
	default:
		b, _ := json.Marshal(x)
		fmt.Fprintf(out, "%s = %s;\n", path, b)
	}
}

// gronKey is .key for an identifier, else ["key"].
func gronKey(k string) string {
	ident := k != ""
	for i, c := range k {
		if !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return "." + k
	}
	b, _ := json.Marshal(k)
	return "[" + string(b) + "]"
}
