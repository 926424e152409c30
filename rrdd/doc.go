// Package rrdd reads and writes XAPI rrdd plugin files: the shared-memory files (by convention
// /dev/shm/metrics/<plugin>) through which xcp-rrdd plugins publish datasources, in protocol v2
// (binary values, JSON metadata) and the older v1 (one JSON document).
//
// # Protocol v2
//
// All integers are big-endian:
//
//	offset  size   field
//	0       11     "DATASOURCES"
//	11      4      data checksum: CRC-32 (IEEE, as zlib's crc32) of the timestamp and values
//	15      4      metadata checksum: CRC-32 (IEEE) of the metadata bytes
//	19      4      number of datasources n
//	23      8      timestamp: the bits of an IEEE-754 double, unix seconds (see below)
//	31      8*n    values, int64 or IEEE-754 double per the datasource's value_type
//	31+8n   4      metadata length m
//	35+8n   m      metadata: {"datasources": {"<name>": {<fields>}, ...}}
//
// The field widths and the checksum are those of xcp-rrdd's rrd_protocol_v2.ml (the design
// document's "16 + 16" bytes of checksums are wrong; the checksums are 4 bytes each), and the
// CRC is zlib's crc32 as used by XAPI's Python rrdd.py (zlib.crc32) and C rrd-client-lib.
// Values pair with datasources in the order the metadata object lists them.
//
// # Timestamp
//
// xcp-rrdd reads the timestamp as Int64.float_of_bits of the 8 bytes since CA-391651 (2024) and
// stamps the plugin's values with it; a writer that puts int64 seconds there (OCaml's writer
// before that fix, rrd-client-lib before 2025-08, this package before issue 35) is read as a
// time of about 1e-314 seconds and its data goes missing. The Encoder writes the double, with
// the sub-second part. The Reader reads the double, and still reads files of older writers:
// int64 seconds below 2^52 have the sign and exponent bits of a double all zero, a denormal no
// writer means, so a field whose top 12 bits are zero is taken as int64 seconds and any other as
// a double. A timestamp of zero, negative, not finite or beyond the year 36812 reads as the zero
// time.
//
// # What other writers write
//
// What XAPI's own plugin libraries write, and this package therefore reads:
//   - Python rrdd.py writes the timestamp as a big-endian double (struct ">d").
//   - Python writes min/max as strings ("-inf", "inf", "0.0") but a float infinity passed by the
//     caller comes out as a bare -Infinity/Infinity token; "default" is the string "true".
//   - OCaml's rrd_json.ml writes every field as a string ("min": "-inf", "default": "true") and
//     also puts a stale "value" into the metadata; the Reader ignores it.
//   - The C rrd-client-lib counts a trailing NUL in the metadata length and checksum (xcp-rrdd
//     trims NULs before parsing) and writes pretty-printed JSON. Its current version writes the
//     owner of VM and SR datasources as "vm <uuid>" and "sr <uuid>", as xcp-rrdd expects; its
//     versions before owner uuids were added wrote the bare words "vm" and "rrd", which the
//     Reader keeps verbatim (see Datasource).
//   - Writers update the file in place without truncating it (Python writes values and metadata,
//     then the header), so a reader can see a torn file, and bytes after the metadata are junk.
//
// # Protocol v1
//
//	"DATASOURCES\n" <8 hex digits: JSON length> "\n" <32 hex digits: MD5 of the JSON> "\n" <JSON>
//
// with {"timestamp": N, "datasources": {"<name>": {..., "value": V}}}, as rrd_protocol_v1.ml
// reads it. The design document's example uses the key "data_sources" and is not valid JSON
// (missing and trailing commas); the Reader accepts "data_sources" as a synonym, nothing more.
//
// # Reading
//
// Reader follows xcp-rrdd's algorithm: a bad header is an error; an unchanged data checksum is
// ErrNoUpdate; a data checksum that does not match the data is a torn or corrupt read
// (ErrChecksum, the last good values are kept); an unchanged metadata checksum reuses the cached
// datasources, a changed one is verified and reparsed. Values are read per metadata entry, in
// order, as xcp-rrdd does: a count larger than the metadata lists (Python's rrdd.py writes one
// when a plugin sets a name twice) leaves the extra values unread; a smaller one is ErrPayload. It is as strict as xcp-rrdd on checksums
// and more tolerant on metadata spelling (see Datasource).
//
// Read's errors never quote the file: they say what is wrong and where (an offset, the file's
// length, a datasource's index), not which bytes were found, nor checksums or counts read from
// it. A program that reads files others may put in its plugin directory (the agent, as root)
// shows its errors to people who may not read those files.
package rrdd
