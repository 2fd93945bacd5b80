package api

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonCodec is the JSON codec of every seqd handler, in place of
// connect-go's: a request with a field the message does not have is refused
// (connect-go's discards it, so that {"spce":"default"} would silently take
// a value from the default space), its errors name the field and what it
// takes instead of protojson's positions and Go types, and every field of a
// response is written, zeros included (a client reading resp["worker"] finds
// 0 rather than no key). The binary protobuf codec is untouched: unknown
// fields there are how newer clients and servers meet older ones.
type jsonCodec struct{ name string }

// jsonCodecs replace connect-go's codecs of both names Connect uses for JSON.
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
	}
}

func (c jsonCodec) Name() string { return c.name }

var jsonOut = protojson.MarshalOptions{EmitUnpopulated: true}

func (jsonCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return jsonOut.Marshal(pm)
}

func (jsonCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	if len(data) == 0 {
		return errors.New("the body is empty: send a JSON object, {} for a call without arguments")
	}
	if err := protojson.Unmarshal(data, pm); err != nil {
		return readableJSONError(err, pm.ProtoReflect().Descriptor())
	}
	return nil
}

// protojson's messages look like `proto: (line 1:9): unknown field "spce"`;
// the matches below turn the common ones into sentences about the message's
// own fields. Anything else keeps protojson's text without its prefix. The
// text is not protojson's API: TestFrontDoorErrors notices when it changes.
var (
	// protojson puts a space or, at random, a no-break space after
	// "proto:" (its text is deliberately unstable).
	jsonErrPrefix    = regexp.MustCompile(`^proto:[\s\x{00a0}]*(\(line (\d+):(\d+)\):[\s\x{00a0}]*)?`)
	jsonUnknownField = regexp.MustCompile(`^unknown field "([^"]*)"`)
	jsonBadValue     = regexp.MustCompile(`^invalid value for (\S+) field (\S+): (.*)$`)
)

func readableJSONError(err error, md protoreflect.MessageDescriptor) error {
	msg := err.Error()
	where := ""
	if m := jsonErrPrefix.FindStringSubmatch(msg); m != nil {
		if m[2] != "" {
			where = fmt.Sprintf(" (line %s, column %s)", m[2], m[3])
		}
		msg = msg[len(m[0]):]
	}
	if m := jsonUnknownField.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("unknown field %q in %s%s; its fields are %s", m[1], md.FullName(), where, fieldNames(md))
	}
	if m := jsonBadValue.FindStringSubmatch(msg); m != nil {
		name, got := m[2], m[3]
		f := md.Fields().ByJSONName(name)
		if f == nil {
			f = md.Fields().ByName(protoreflect.Name(name))
		}
		if f != nil {
			return fmt.Errorf("%s, got %s%s", fieldTakes(f), got, where)
		}
	}
	return fmt.Errorf("malformed JSON for %s: %s%s", md.FullName(), msg, where)
}

// fieldTakes says what a field holds: "keys are unsigned integers",
// "count is an unsigned integer".
func fieldTakes(f protoreflect.FieldDescriptor) string {
	what := ""
	switch f.Kind() {
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		what = "unsigned integer"
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		what = "integer"
	case protoreflect.BoolKind:
		what = "boolean (true or false)"
	case protoreflect.StringKind:
		what = "string"
	case protoreflect.BytesKind:
		what = "base64 string"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		what = "number"
	case protoreflect.EnumKind:
		what = "enum name"
	default:
		what = "object"
	}
	if f.IsList() {
		return fmt.Sprintf("%s are %ss", f.JSONName(), what)
	}
	article := "a"
	if strings.ContainsAny(what[:1], "aeiou") {
		article = "an"
	}
	return fmt.Sprintf("%s is %s %s", f.JSONName(), article, what)
}

func fieldNames(md protoreflect.MessageDescriptor) string {
	fs := md.Fields()
	if fs.Len() == 0 {
		return "none (send {})"
	}
	names := make([]string, fs.Len())
	for i := range names {
		names[i] = fs.Get(i).JSONName()
	}
	return strings.Join(names, ", ")
}
