package ingest

import (
	"errors"
	"fmt"
	"reflect"

	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Bounded decoding of OTLP requests (finding N3 of issue 31).
//
// Decoding a protobuf or OTLP/JSON body makes a Go value of every sub-message it holds, and an
// empty sub-message is two bytes on the wire (three in JSON) but a hundred or more in memory:
// a 32 MiB body of them decodes to over a gigabyte. So before a body is decoded, MeasureOTLP
// walks it without allocating, counts its sub-messages and estimates what its decoded form will
// cost in memory (an upper bound, see msgCost and elemCost), and the handler refuses it (413,
// with the figure and the limit) when it holds more than MaxOTLPMessages sub-messages or would
// cost more than MaxBodyBytes decoded; the estimate is then taken from the body budget shared
// with the other requests (Config.Bodies) for as long as the decoded request is held.

// Costs, in bytes of memory, that MeasureOTLP charges for the decoded form of a body (checked
// by TestOTLPCostCoversDecoding against what the decoding of adversarial and ordinary bodies
// allocates, garbage included):
//   - a protobuf sub-message: its Go struct rounded up to the allocator's size class, its
//     pointer in a repeated field, whose backing array grows by a quarter once large, so that
//     all its copies add up to five pointers per element (repeatedPtrCost), and
//     a oneof's wrapper (oneofCost) when it is one (msgCosts); a scalar field of a oneof costs
//     its wrapper, an optional scalar its pointer (8);
//   - jsonMsgCost: an OTLP/JSON object, which the walk cannot type: the largest message (a
//     histogram data point, 192 bytes), with what protojson allocates on the way (up to 260
//     bytes measured);
//   - elemCost: an element of a repeated field sent one at a time (a uint64 or a string's
//     header, appended to a growing slice: 45 bytes allocated in all measured); packedCost: one
//     of a packed field (the decoder counts them and allocates once); jsonElemCost: an element
//     of a JSON array (80 bytes measured: protojson goes through a reflected list);
//   - every byte of a string or bytes field is charged twice (it is copied), a JSON body's
//     twice, and every byte of an unknown protobuf field unknownFactor times (each is appended
//     to a growing buffer: five times its size allocated in all).
const (
	repeatedPtrCost = 48
	oneofCost       = 16
	jsonMsgCost     = 384
	elemCost        = 64
	packedCost      = 16
	jsonElemCost    = 96
	unknownFactor   = 6
)

// msgCosts is what a sub-message of each type of the request costs (see above), computed once
// from the generated types; read-only after.
var msgCosts = func() map[protoreflect.FullName]int64 {
	m := map[protoreflect.FullName]int64{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if _, ok := m[md.FullName()]; ok {
			return
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		size := int64(256)
		if err == nil {
			size = int64(reflect.TypeOf(mt.New().Interface()).Elem().Size())
		}
		m[md.FullName()] = sizeClass(size) + repeatedPtrCost + oneofCost
		fields := md.Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk(metricsDataDesc)
	return m
}()

// sizeClass rounds n up as the allocator does (approximately: to 16 bytes up to 256, then to an
// eighth of the next power of two).
func sizeClass(n int64) int64 {
	if n <= 256 {
		return (n + 15) &^ 15
	}
	step := int64(32)
	for step*8 < n {
		step *= 2
	}
	return (n + step - 1) / step * step
}

// maxOTLPDepth bounds the nesting of an OTLP request (attribute values nest: arrays and
// key-value lists); the deepest legitimate request nests 6 levels before an attribute's value.
const maxOTLPDepth = 64

// OTLPCost is what MeasureOTLP found in a body.
type OTLPCost struct {
	Messages int   // sub-messages (JSON: objects)
	Bytes    int64 // estimated memory of the decoded request
}

// errOTLPTooLarge marks a body over a limit of MeasureOTLP.
var errOTLPTooLarge = errors.New("OTLP request too large")

// metricsDataDesc describes the decoded request type.
var metricsDataDesc = (&metricsv1.MetricsData{}).ProtoReflect().Descriptor()

// MeasureOTLP walks an OTLP metrics body (protobuf, or OTLP/JSON when asJSON) without decoding
// it and returns its sub-messages and the estimated memory of its decoded form. It stops as soon
// as the body holds more than maxMessages sub-messages or costs more than maxBytes, with an error
// wrapping errOTLPTooLarge that gives the limit crossed; a body nested deeper than 64 levels, or
// malformed protobuf, is an error too. It allocates nothing.
func MeasureOTLP(body []byte, asJSON bool, maxMessages int, maxBytes int64) (OTLPCost, error) {
	m := measure{maxMsgs: maxMessages, maxBytes: maxBytes}
	var err error
	if asJSON {
		err = m.json(body)
	} else {
		m.c.Bytes = msgCosts[metricsDataDesc.FullName()]
		err = m.wire(body, metricsDataDesc, 0)
	}
	if err == nil {
		err = m.check()
	}
	return m.c, err
}

type measure struct {
	c        OTLPCost
	maxMsgs  int
	maxBytes int64
}

func (m *measure) check() error {
	if m.maxMsgs > 0 && m.c.Messages > m.maxMsgs {
		return fmt.Errorf("%w: more than %d sub-messages (the limit per request)", errOTLPTooLarge, m.maxMsgs)
	}
	if m.maxBytes > 0 && m.c.Bytes > m.maxBytes {
		return fmt.Errorf("%w: decoded, it would take more than %d bytes (the limit per request)", errOTLPTooLarge, m.maxBytes)
	}
	return nil
}

// wire walks the protobuf encoding b of a message of type md.
func (m *measure) wire(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > maxOTLPDepth {
		return fmt.Errorf("decode OTLP metrics: nested deeper than %d levels", maxOTLPDepth)
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decode OTLP metrics: %w", protowire.ParseError(n))
		}
		v := protowire.ConsumeFieldValue(num, typ, b[n:])
		if v < 0 {
			return fmt.Errorf("decode OTLP metrics: %w", protowire.ParseError(v))
		}
		val := b[n : n+v]
		fd := fields.ByNumber(num)
		switch {
		case fd == nil || !wireTypeFits(fd, typ):
			m.c.Bytes += unknownFactor * int64(n+v) // kept as unknown bytes
		case typ == protowire.BytesType && (fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind):
			sub, _ := protowire.ConsumeBytes(val)
			m.c.Messages++
			if c, ok := msgCosts[fd.Message().FullName()]; ok {
				m.c.Bytes += c
			} else {
				m.c.Bytes += jsonMsgCost // not of the request's types: cannot happen
			}
			if err := m.check(); err != nil {
				return err
			}
			if err := m.wire(sub, fd.Message(), depth+1); err != nil {
				return err
			}
		case typ == protowire.BytesType && fd.IsList() && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
			packed, _ := protowire.ConsumeBytes(val) // packed scalars: one element per varint or fixed
			m.c.Bytes += packedCost * int64(packedLen(packed, typeOfKind(fd.Kind())))
		case typ == protowire.BytesType: // string or bytes
			m.c.Bytes += 2*int64(v) + elemCost + oneofCost
		case fd.IsList():
			m.c.Bytes += elemCost
		case fd.ContainingOneof() != nil:
			m.c.Bytes += oneofCost
		case fd.HasPresence():
			m.c.Bytes += 8 // an optional scalar's pointer
		}
		if err := m.check(); err != nil {
			return err
		}
		b = b[n+v:]
	}
	return nil
}

// wireTypeFits reports whether a field of fd can come as wire type typ (a repeated scalar may
// come packed); otherwise the decoder keeps it as an unknown field.
func wireTypeFits(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	want := typeOfKind(fd.Kind())
	return typ == want || (typ == protowire.BytesType && fd.IsList() && want != protowire.BytesType)
}

// typeOfKind is the wire type of a field of kind k.
func typeOfKind(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.Fixed64Type
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return protowire.Fixed32Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// packedLen returns the number of elements of a packed repeated field of wire type typ (a
// trailing partial element counted: the decoder refuses it anyway).
func packedLen(b []byte, typ protowire.Type) int {
	switch typ {
	case protowire.Fixed64Type:
		return (len(b) + 7) / 8
	case protowire.Fixed32Type:
		return (len(b) + 3) / 4
	}
	n := 0
	for _, c := range b {
		if c < 0x80 {
			n++
		}
	}
	return n
}

// json walks an OTLP/JSON body: every object is charged as a sub-message, every other array
// element as a scalar, and string bytes as strings. It does not validate the JSON (the decoder
// does); it only needs to see every object and array element, which it does for any input.
func (m *measure) json(b []byte) error {
	m.c.Bytes += 2 * int64(len(b)) // strings and unknown values, copied
	var stack [maxOTLPDepth + 1]byte
	depth := 0
	expectElem := false // after '[' or ',' in an array: the next value is an element
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			if expectElem {
				m.c.Bytes += jsonElemCost
			}
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			expectElem = false
			continue
		case '{', '[':
			if depth == len(stack) {
				return fmt.Errorf("decode OTLP metrics: nested deeper than %d levels", maxOTLPDepth)
			}
			if c == '{' {
				m.c.Messages++
				m.c.Bytes += jsonMsgCost
				if err := m.check(); err != nil {
					return err
				}
			} else if expectElem {
				m.c.Bytes += jsonElemCost
			}
			stack[depth] = c
			depth++
			expectElem = c == '['
			continue
		case '}', ']':
			if depth > 0 {
				depth--
			}
			expectElem = false
			continue
		case ',':
			expectElem = depth > 0 && stack[depth-1] == '['
			continue
		}
		if expectElem { // a number, true, false or null in an array
			m.c.Bytes += jsonElemCost
			if err := m.check(); err != nil {
				return err
			}
		}
		expectElem = false
	}
	return nil
}
