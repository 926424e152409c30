package rrdd

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Header is the magic string every plugin file starts with.
const Header = "DATASOURCES"

// ValueType says how a datasource's 8-byte value is encoded.
type ValueType uint8

// The value types. The zero value is invalid: v2 metadata must name one.
const (
	Int64 ValueType = 1 // "int64": two's complement int64
	Float ValueType = 2 // "float": IEEE-754 double
)

// String returns the protocol spelling: "int64" or "float".
func (t ValueType) String() string {
	switch t {
	case Int64:
		return "int64"
	case Float:
		return "float"
	}
	return "valuetype(" + strconv.Itoa(int(t)) + ")"
}

// DSType is the type of measurement, as xcp-rrdd interprets it.
type DSType uint8

// The measurement types. The zero value, Absolute, is the protocol's default.
const (
	// Absolute is a level that xcp-rrdd stores as read (the design document's "counters which
	// are reset on reading").
	Absolute DSType = iota
	// Gauge is a level such as a temperature.
	Gauge
	// Derive is an ever-growing counter; xcp-rrdd stores its rate of change.
	Derive
)

// String returns the protocol spelling: "absolute", "gauge" or "derive".
func (t DSType) String() string {
	switch t {
	case Absolute:
		return "absolute"
	case Gauge:
		return "gauge"
	case Derive:
		return "derive"
	}
	return "dstype(" + strconv.Itoa(int(t)) + ")"
}

// Transform is the function xcp-rrdd applies to a consolidated value (v2 metadata "transform").
type Transform uint8

// The transforms. The zero value, Identity, is the default.
const (
	Identity Transform = iota
	Inverse            // 1/x
)

// String returns the protocol spelling: "identity" or "inverse".
func (t Transform) String() string {
	if t == Inverse {
		return "inverse"
	}
	return "identity"
}

// Datasource is one datasource's metadata. Readers hand out Datasources they own; callers must
// not modify them.
//
// Parsing follows xcp-rrdd (rrd_protocol_v2.ml, rrd_rpc.ml) with these tolerances: every field may
// be a JSON string, a bare number or a bare boolean (xcp-rrdd only takes strings, but Python's
// rrdd.py can write a bare -Infinity and other writers write bare numbers and booleans); null is
// treated as absent; type, value_type and transform are case-insensitive; an owner that is not
// "host", "vm <uuid>" or "sr <uuid>" is kept verbatim instead of rejecting the whole file (old
// versions of the C rrd-client-lib wrote the bare words "vm" and "rrd"). Unknown keys are ignored.
type Datasource struct {
	Name        string
	Description string
	// Owner is "host", "vm <uuid>" or "sr <uuid>" (lower-cased keyword, uuid as written), or
	// the writer's text verbatim when it is none of these. Empty means "host" to a Writer.
	Owner     string
	ValueType ValueType
	Type      DSType
	Default   bool
	Units     string
	// Min and Max bound the stored value; out-of-range values are unknown to xcp-rrdd. The
	// defaults are -Inf and +Inf. A Writer writes zero values as given: set them to
	// math.Inf(-1) and math.Inf(1) for no bounds (NewDatasource does).
	Min, Max  float64
	Transform Transform
}

// NewDatasource returns a host-owned absolute datasource with no bounds.
func NewDatasource(name string, vt ValueType) Datasource {
	return Datasource{Name: name, Owner: "host", ValueType: vt, Min: math.Inf(-1), Max: math.Inf(1)}
}

// Value is a datasource's raw 64-bit value; its meaning depends on the datasource's ValueType.
type Value uint64

// IntValue returns the Value of an int64 datasource.
func IntValue(i int64) Value { return Value(uint64(i)) }

// FloatValue returns the Value of a float datasource.
func FloatValue(f float64) Value { return Value(math.Float64bits(f)) }

// Int returns v as an int64 (meaningful for Int64 datasources).
func (v Value) Int() int64 { return int64(v) }

// Float returns v as a float64 (meaningful for Float datasources).
func (v Value) Float() float64 { return math.Float64frombits(uint64(v)) }

// As returns v converted to float64 according to t.
func (v Value) As(t ValueType) float64 {
	if t == Int64 {
		return float64(int64(v))
	}
	return v.Float()
}

// fieldText returns the text of a metadata field: a string's contents, a number's literal or a
// boolean's "true"/"false". ok is false when the key is absent or null.
func fieldText(obj *jsonValue, key string) (string, bool, error) {
	v, ok := obj.get(key)
	if !ok || v.kind == jsonNull {
		return "", false, nil
	}
	switch v.kind {
	case jsonString, jsonNumber, jsonBool:
		return v.text, true, nil
	}
	return "", false, fmt.Errorf("field %s is not a string, number or boolean", key)
}

// parseFloatText parses min/max the way OCaml's float_of_string does for the spellings writers
// use: "-inf", "inf", "infinity", "nan", decimal and exponent forms, plus JSON's Infinity.
func parseFloatText(s string) (float64, error) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, nil // ±Inf or 0, as strtod gives
		}
		return 0, errors.New("not a number") // strconv's error quotes the text
	}
	return f, nil
}

func parseBoolText(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("not true or false")
}

func parseValueType(s string) (ValueType, error) {
	switch strings.ToLower(s) {
	case "int64":
		return Int64, nil
	case "float":
		return Float, nil
	}
	return 0, errors.New("unknown value_type")
}

func parseDSType(s string) (DSType, error) {
	switch strings.ToLower(s) {
	case "absolute":
		return Absolute, nil
	case "gauge":
		return Gauge, nil
	case "derive":
		return Derive, nil
	}
	return 0, errors.New("unknown type")
}

// normalizeOwner parses an owner as rrd_rpc.ml's owner_of_string does (lower-case, split on
// single spaces) and keeps anything else verbatim.
func normalizeOwner(s string) string {
	lower := strings.ToLower(s)
	parts := strings.Split(lower, " ")
	switch {
	case len(parts) == 1 && parts[0] == "host":
		return "host"
	case len(parts) == 2 && (parts[0] == "vm" || parts[0] == "sr") && parts[1] != "":
		return lower
	}
	return s
}

// parseDatasource builds a Datasource from m, the index-th member of the datasources object.
// valueTypeDefault is 0 when value_type is required (v2) or the default to use (v1: float).
// Errors name the datasource by index and offset, never by name.
func parseDatasource(index int, m *jsonMember, valueTypeDefault ValueType) (Datasource, error) {
	fail := func(err error) (Datasource, error) {
		return Datasource{}, fmt.Errorf("datasource %d at offset %d: %w", index, m.pos, err)
	}
	obj := &m.value
	if obj.kind != jsonObject {
		return fail(errors.New("not an object"))
	}
	ds := Datasource{Name: m.key, Owner: "host", Min: math.Inf(-1), Max: math.Inf(1), ValueType: valueTypeDefault}
	text := func(key string) (string, bool, error) { return fieldText(obj, key) }
	var err error
	if s, ok, e := text("description"); e != nil {
		return fail(e)
	} else if ok {
		ds.Description = s
	}
	if s, ok, e := text("units"); e != nil {
		return fail(e)
	} else if ok {
		ds.Units = s
	}
	if s, ok, e := text("owner"); e != nil {
		return fail(e)
	} else if ok {
		ds.Owner = normalizeOwner(s)
	}
	if s, ok, e := text("value_type"); e != nil {
		return fail(e)
	} else if ok {
		if ds.ValueType, err = parseValueType(s); err != nil {
			return fail(err)
		}
	} else if valueTypeDefault == 0 {
		return fail(errors.New("value_type missing"))
	}
	if s, ok, e := text("type"); e != nil {
		return fail(e)
	} else if ok {
		if ds.Type, err = parseDSType(s); err != nil {
			return fail(err)
		}
	}
	if s, ok, e := text("default"); e != nil {
		return fail(e)
	} else if ok {
		if ds.Default, err = parseBoolText(s); err != nil {
			return fail(fmt.Errorf("default: %w", err))
		}
	}
	if s, ok, e := text("min"); e != nil {
		return fail(e)
	} else if ok {
		if ds.Min, err = parseFloatText(s); err != nil {
			return fail(fmt.Errorf("min: %w", err))
		}
	}
	if s, ok, e := text("max"); e != nil {
		return fail(e)
	} else if ok {
		if ds.Max, err = parseFloatText(s); err != nil {
			return fail(fmt.Errorf("max: %w", err))
		}
	}
	if s, ok, e := text("transform"); e != nil {
		return fail(e)
	} else if ok {
		switch strings.ToLower(s) {
		case "identity":
		case "inverse":
			ds.Transform = Inverse
		default:
			return fail(errors.New("unknown transform"))
		}
	}
	return ds, nil
}

// datasourcesObject returns the object holding the datasources: "datasources", or the design
// document's "data_sources".
func datasourcesObject(root *jsonValue) (*jsonValue, error) {
	if root.kind != jsonObject {
		return nil, errors.New("not a JSON object")
	}
	dss, ok := root.get("datasources")
	if !ok {
		if dss, ok = root.get("data_sources"); !ok {
			return nil, errors.New("no datasources member")
		}
	}
	if dss.kind != jsonObject {
		return nil, errors.New("datasources is not an object")
	}
	return dss, nil
}

// parseMetadata parses v2 metadata into datasources in document order.
func parseMetadata(b []byte) ([]Datasource, error) {
	root, err := parseJSON(b)
	if err != nil {
		return nil, err
	}
	dss, err := datasourcesObject(&root)
	if err != nil {
		return nil, err
	}
	out := make([]Datasource, 0, len(dss.members))
	seen := make(map[string]struct{}, len(dss.members))
	for i := range dss.members {
		m := &dss.members[i]
		if _, dup := seen[m.key]; dup {
			return nil, fmt.Errorf("datasource %d at offset %d: name listed twice", i, m.pos)
		}
		seen[m.key] = struct{}{}
		ds, err := parseDatasource(i, m, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, ds)
	}
	return out, nil
}

// validate checks that ds can be written.
func (ds *Datasource) validate() error {
	if ds.Name == "" {
		return errors.New("datasource with an empty name")
	}
	if ds.ValueType != Int64 && ds.ValueType != Float {
		return fmt.Errorf("datasource %q: invalid value type %d", ds.Name, ds.ValueType)
	}
	if ds.Type > Derive {
		return fmt.Errorf("datasource %q: invalid type %d", ds.Name, ds.Type)
	}
	if ds.Transform > Inverse {
		return fmt.Errorf("datasource %q: invalid transform %d", ds.Name, ds.Transform)
	}
	return nil
}

// appendFloatText writes a bound the way Python's rrdd.py does: "inf", "-inf", "nan" or a
// number that OCaml's float_of_string reads back.
func appendFloatText(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendDatasourceFields appends the members of ds's metadata object (keys sorted, Python's
// json.dumps(sort_keys=True) separators), with value inserted when withValue is set (v1).
func appendDatasourceFields(b []byte, ds *Datasource, withValue bool, v Value) []byte {
	owner := ds.Owner
	if owner == "" {
		owner = "host"
	}
	b = append(b, `{"default": `...)
	b = strconv.AppendQuote(b, strconv.FormatBool(ds.Default))
	b = append(b, `, "description": `...)
	b = appendJSONString(b, ds.Description)
	b = append(b, `, "max": "`...)
	b = appendFloatText(b, ds.Max)
	b = append(b, `", "min": "`...)
	b = appendFloatText(b, ds.Min)
	b = append(b, `", "owner": `...)
	b = appendJSONString(b, owner)
	if ds.Transform != Identity {
		b = append(b, `, "transform": "`...)
		b = append(b, ds.Transform.String()...)
		b = append(b, '"')
	}
	b = append(b, `, "type": "`...)
	b = append(b, ds.Type.String()...)
	b = append(b, `", "units": `...)
	b = appendJSONString(b, ds.Units)
	if withValue {
		b = append(b, `, "value": "`...)
		if ds.ValueType == Int64 {
			b = strconv.AppendInt(b, v.Int(), 10)
		} else {
			b = appendFloatText(b, v.Float())
		}
		b = append(b, '"')
	}
	b = append(b, `, "value_type": "`...)
	b = append(b, ds.ValueType.String()...)
	return append(b, `"}`...)
}

// appendMetadata appends v2 metadata for dss.
func appendMetadata(b []byte, dss []Datasource) []byte {
	b = append(b, `{"datasources": {`...)
	for i := range dss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendJSONString(b, dss[i].Name)
		b = append(b, ": "...)
		b = appendDatasourceFields(b, &dss[i], false, 0)
	}
	return append(b, "}}"...)
}

// appendJSONString appends s as a JSON string, escaping what JSON requires (and DEL) and
// replacing invalid UTF-8 with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20 || r == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
		default:
			b = utf8AppendRune(b, r)
		}
	}
	return append(b, '"')
}
