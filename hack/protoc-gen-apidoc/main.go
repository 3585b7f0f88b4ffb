// Command protoc-gen-apidoc is a protoc (buf) plugin that writes the gRPC API reference,
// docs/api.md, from the proto files and their comments: every service with its methods, every
// message with its fields, every enum with its values. `make generate` runs it and `make
// verify` fails when the committed reference is stale.
package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	protogen.Options{}.Run(func(gen *protogen.Plugin) error {
		gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		var b strings.Builder
		b.WriteString("# gRPC API reference\n\n")
		b.WriteString("Generated from `proto/` by `hack/protoc-gen-apidoc` (`make generate`); do not edit.\n")
		b.WriteString("The error contract (ErrorInfo domain `signet.dev`, reason names, health service names) is in\n")
		b.WriteString("`proto/signet/v1/contract.go`.\n")
		for _, f := range gen.Files {
			if !f.Generate {
				continue
			}
			writeFile(&b, f)
		}
		out := gen.NewGeneratedFile("api.md", "")
		_, err := out.Write([]byte(b.String()))
		return err
	})
}

// writeFile renders one proto file: its package comment, services, messages and enums.
func writeFile(b *strings.Builder, f *protogen.File) {
	fmt.Fprintf(b, "\n## Package `%s`\n\n", f.Desc.Package())
	if c := comment(f.Desc.SourceLocations().ByPath(protoreflect.SourcePath{2}).LeadingComments); c != "" {
		b.WriteString(c + "\n")
	}
	for _, s := range f.Services {
		fmt.Fprintf(b, "\n### Service `%s`\n\n%s\n", s.Desc.FullName(), comment(string(s.Comments.Leading)))
		b.WriteString("\n| method | request | response | description |\n|---|---|---|---|\n")
		for _, m := range s.Methods {
			fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", m.Desc.Name(), typeLink(m.Input.Desc), typeLink(m.Output.Desc), cell(string(m.Comments.Leading)))
		}
	}
	for _, m := range f.Messages {
		writeMessage(b, m)
	}
	for _, e := range f.Enums {
		writeEnum(b, e)
	}
}

// writeMessage renders a message and, after it, the messages and enums nested in it.
func writeMessage(b *strings.Builder, m *protogen.Message) {
	if m.Desc.IsMapEntry() {
		return
	}
	fmt.Fprintf(b, "\n### `%s`\n\n%s\n", m.Desc.FullName(), comment(string(m.Comments.Leading)))
	if len(m.Fields) > 0 {
		b.WriteString("\n| field | number | type | description |\n|---|---|---|---|\n")
		for _, fd := range m.Fields {
			fmt.Fprintf(b, "| `%s` | %d | %s | %s |\n", fd.Desc.Name(), fd.Desc.Number(), fieldType(fd.Desc), cell(string(fd.Comments.Leading)))
		}
	}
	for _, n := range m.Messages {
		writeMessage(b, n)
	}
	for _, e := range m.Enums {
		writeEnum(b, e)
	}
}

func writeEnum(b *strings.Builder, e *protogen.Enum) {
	fmt.Fprintf(b, "\n### enum `%s`\n\n%s\n", e.Desc.FullName(), comment(string(e.Comments.Leading)))
	b.WriteString("\n| value | number | description |\n|---|---|---|\n")
	for _, v := range e.Values {
		fmt.Fprintf(b, "| `%s` | %d | %s |\n", v.Desc.Name(), v.Desc.Number(), cell(string(v.Comments.Leading)))
	}
}

// fieldType names a field's type: repeated, optional and map shapes, message and enum types
// linked to their sections.
func fieldType(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return fmt.Sprintf("map<%s, %s>", fieldType(fd.MapKey()), fieldType(fd.MapValue()))
	}
	var t string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		t = typeLink(fd.Message())
	case protoreflect.EnumKind:
		t = typeLink(fd.Enum())
	default:
		t = fd.Kind().String()
	}
	switch {
	case fd.IsList():
		return "repeated " + t
	case fd.HasPresence() && fd.ContainingOneof() != nil && fd.ContainingOneof().IsSynthetic():
		return "optional " + t
	}
	return t
}

// typeLink is a message or enum name, linked to its section when it is Signet's own.
func typeLink(d protoreflect.Descriptor) string {
	name := string(d.FullName())
	if !strings.HasPrefix(name, "signet.") {
		return "`" + name + "`"
	}
	anchor := strings.ToLower(strings.NewReplacer(".", "", " ", "-").Replace(name))
	if _, ok := d.(protoreflect.EnumDescriptor); ok {
		anchor = "enum-" + anchor
	}
	return fmt.Sprintf("[`%s`](#%s)", d.Name(), anchor)
}

// comment is a proto comment as Markdown text: the comment markers gone, lines joined into
// paragraphs.
func comment(c string) string {
	var paras []string
	var cur []string
	for _, line := range strings.Split(strings.TrimSpace(c), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//"))
		if line == "" {
			if len(cur) > 0 {
				paras = append(paras, strings.Join(cur, " "))
				cur = nil
			}
			continue
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		paras = append(paras, strings.Join(cur, " "))
	}
	return strings.Join(paras, "\n\n")
}

// cell is a comment fit for one table cell: one line, pipes escaped.
func cell(c string) string {
	return strings.ReplaceAll(strings.ReplaceAll(comment(c), "\n\n", " "), "|", `\|`)
}
