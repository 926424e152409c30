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
//	23      8      timestamp (int64 unix seconds; see below)
//	31      8*n    values, int64 or IEEE-754 double per the datasource's value_type
//	31+8n   4      metadata length m
//	35+8n   m      metadata: {"datasources": {"<name>": {<fields>}, ...}}
//
// The field widths and the checksum are those of xcp-rrdd's rrd_protocol_v2.ml (the design
// document's "16 + 16" bytes of checksums are wrong; the checksums are 4 bytes each), and the
// CRC is zlib's crc32 as used by XAPI's Python rrdd.py (zlib.crc32) and C rrd-client-lib.
// Values pair with datasources in the order the metadata object lists them.
//
// What XAPI's own plugin libraries write, and this package therefore reads:
//   - Python rrdd.py writes the timestamp as a big-endian double (struct ">d"), not an int64;
//     xcp-rrdd ignores the timestamp. The Reader recognises a double by its bit pattern.
//   - Python writes min/max as strings ("-inf", "inf", "0.0") but a float infinity passed by the
//     caller comes out as a bare -Infinity/Infinity token; "default" is the string "true".
//   - OCaml's rrd_json.ml writes every field as a string ("min": "-inf", "default": "true") and
//     also puts a stale "value" into the metadata; the Reader ignores it.
//   - The C rrd-client-lib counts a trailing NUL in the metadata length and checksum (xcp-rrdd
//     trims NULs before parsing), writes pretty-printed JSON, and writes the owner of VM and SR
//     datasources as the bare words "vm" and "rrd".
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
// datasources, a changed one is verified and reparsed. It is as strict as xcp-rrdd on checksums
// and more tolerant on metadata spelling (see Datasource).
//
// Read's errors never quote the file: they say what is wrong and where (an offset, the file's
// length, a datasource's index), not which bytes were found, nor checksums or counts read from
// it. A program that reads files others may put in its plugin directory (the agent, as root)
// shows its errors to people who may not read those files.
package rrdd
