package rrdd

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// checkErrorText fails if an error's text could be quoting a file: Read's errors end up in the
// agent's status page and log, where users other than the file's owner read them.
func checkErrorText(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if len(msg) > 300 {
		t.Fatalf("error of %d bytes: %q", len(msg), msg)
	}
	for _, c := range []byte(msg) {
		if c < 0x20 || c > 0x7e || c == '"' {
			t.Fatalf("error %q has a quote or a byte outside printable ASCII: is it quoting the file?", msg)
		}
	}
}

// TestReadErrorsDoNotQuoteFileBytes: whatever part of a plugin file is wrong, Read's error says
// where and what, by offset and length, and never repeats the file's bytes (a file that is not
// a plugin file, such as /etc/shadow, is read as one when it is put where plugins are).
//
// Security finding 1.
func TestReadErrorsDoNotQuoteFileBytes(t *testing.T) {
	const secret = "S3cr3t"
	field := func(fields string) []byte {
		return buildV2(1, []uint64{0}, `{"datasources": {"`+secret+`": {`+fields+`}}}`, "")
	}
	files := map[string][]byte{
		"shadow":        []byte("root:" + secret + ":2022:0:99999:7:::\n"),
		"short":         []byte(secret),
		"v1 length":     []byte("DATASOURCES\n" + secret + "xx\n0123456789abcdef0123456789abcdef\n{}"),
		"v1 md5":        []byte("DATASOURCES\n00000002\n" + secret + "0123456789abcdef0123456789\n{}"),
		"v1 truncated":  []byte("DATASOURCES\n0000ffff\n0123456789abcdef0123456789abcdef\n" + secret),
		"v1 checksum":   []byte("DATASOURCES\n00000006\n0123456789abcdef0123456789abcdef\n" + secret),
		"v1 json":       v1File(`{"datasources": {"` + secret + `": ` + secret + `}}`),
		"v1 value":      v1File(`{"datasources": {"` + secret + `": {"value_type": "int64", "value": "` + secret + `"}}}`),
		"v1 twice":      v1File(`{"datasources": {"` + secret + `": {"value": 1}, "` + secret + `": {"value": 1}}}`),
		"v1 no value":   v1File(`{"datasources": {"` + secret + `": {}}}`),
		"v2 torn":       append(buildV2(1, []uint64{7}, `{}`, "")[:23], secret+secret...),
		"value_type":    field(`"value_type": "` + secret + `"`),
		"type":          field(`"value_type": "int64", "type": "` + secret + `"`),
		"min":           field(`"value_type": "int64", "min": "` + secret + `"`),
		"max":           field(`"value_type": "int64", "max": "` + secret + `"`),
		"default":       field(`"value_type": "int64", "default": "` + secret + `"`),
		"transform":     field(`"value_type": "int64", "transform": "` + secret + `"`),
		"missing type":  field(`"units": "` + secret + `"`),
		"not object":    buildV2(1, []uint64{0}, `{"datasources": {"`+secret+`": "`+secret+`"}}`, ""),
		"json garbage":  buildV2(1, []uint64{0}, `{"datasources": {"`+secret+`" `+secret+`}}`, ""),
		"json after":    buildV2(1, []uint64{0}, `{"datasources": {}} `+secret, ""),
		"json escape":   buildV2(1, []uint64{0}, `{"datasources": {"\`+secret+`": {}}}`, ""),
		"json char":     buildV2(1, []uint64{0}, `{"datasources": {"a": {"value_type": "int64"}, `+secret+`}}`, ""),
		"json array":    buildV2(1, []uint64{0}, `{"datasources": ["`+secret+`" `+secret+`]}`, ""),
		"twice":         buildV2(1, []uint64{0, 0}, `{"datasources": {"`+secret+`": {"value_type": "int64"}, "`+secret+`": {"value_type": "int64"}}}`, ""),
		"count":         buildV2(1, []uint64{0}, `{"datasources": {"`+secret+`": {"value_type": "int64"}, "b": {"value_type": "int64"}}}`, ""),
		"no datasource": buildV2(1, []uint64{0}, `{"`+secret+`": {}}`, ""),
	}
	for name, b := range files {
		var r Reader
		err := r.Read(b)
		if err == nil {
			t.Errorf("%s: Read succeeded; want an error", name)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "S3") {
			t.Errorf("%s: error %q quotes the file", name, err)
		}
		checkErrorText(t, err)
		known := false
		for _, e := range []error{ErrHeader, ErrChecksum, ErrTruncated, ErrPayload} {
			known = known || errors.Is(err, e)
		}
		if !known {
			t.Errorf("%s: error %v wraps none of the package's errors", name, err)
		}
	}
	// A bad header says so, with the file's length, not its first bytes.
	var r Reader
	err := r.Read(files["shadow"])
	if want := fmt.Sprintf("no DATASOURCES at offset 0 (file of %d bytes): invalid header", len(files["shadow"])); err == nil || err.Error() != want {
		t.Errorf("Read(shadow) = %v; want %q", err, want)
	}
	// A bad datasource is named by its index and offset.
	err = r.Read(files["value_type"])
	if err == nil || !strings.Contains(err.Error(), "datasource 0 at offset 17: unknown value_type") {
		t.Errorf("Read(bad value_type) = %v; want datasource 0 at offset 17", err)
	}
}
