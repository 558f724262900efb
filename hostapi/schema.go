package hostapi

// Small constructors for parameter schemas, so op declarations stay short.

// String is a string parameter schema.
func String() Schema { return Schema{"type": "string"} }

// Integer is an integer parameter schema with an optional minimum.
func Integer(min ...int) Schema {
	s := Schema{"type": "integer"}
	if len(min) > 0 {
		s["minimum"] = min[0]
	}
	return s
}

// Number is a number parameter schema.
func Number() Schema { return Schema{"type": "number"} }

// Boolean is a boolean parameter schema.
func Boolean() Schema { return Schema{"type": "boolean"} }

// Enum is a string parameter limited to values.
func Enum(values ...string) Schema {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	return Schema{"type": "string", "enum": vs}
}

// ArrayOf is an array parameter whose items follow item.
func ArrayOf(item Schema) Schema { return Schema{"type": "array", "items": item} }

// Object is an object parameter schema with the given properties.
func Object(props Schema, required ...string) Schema {
	s := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// AnyValue accepts any JSON value.
func AnyValue() Schema { return Schema{} }

// FileRef is the parameter schema of a file reference (id or name).
func FileRef() Schema { return Schema{"type": "string", "minLength": 1} }

// Ref declares the conventional file parameter "id" (SPEC 4).
func Ref(doc string) Param {
	if doc == "" {
		doc = "File id or workspace path, e.g. \"reports/q3.xlsx\""
	}
	return Param{Name: "id", Schema: FileRef(), Doc: doc, Required: true}
}
