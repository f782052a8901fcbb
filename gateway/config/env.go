package config

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment variable custos serve
// reads as a setting.
const EnvPrefix = "CUSTOS_"

// EnvName is the environment variable that sets the setting at path (YAML
// keys from the top): CUSTOS_ and the keys in upper case joined by "__",
// so tokens.accept_any_jti is CUSTOS_TOKENS__ACCEPT_ANY_JTI.
func EnvName(path ...string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, "__"))
}

// ApplyEnviron applies the CUSTOS_* variables of environ ("NAME=value",
// as os.Environ returns) that name a setting, in name order. A variable
// names a setting by EnvName: a key of a section (a mapping of fixed
// keys) continues the path, anything else (a value, a list, a map of
// names) is the whole setting, its value read as YAML ("[a, b]",
// "{demo.echo: {type: echo}}", "10s"), a string setting's value taken as
// it is. A map given this way is merged over the file's, a list replaces
// it. A variable with "__" that names no setting is an error; other
// CUSTOS_* variables (CUSTOS_CONFIG) are not settings and are left alone.
func (c *Config) ApplyEnviron(environ []string) error {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, EnvPrefix) && value != "" {
			vars[name] = value
		}
	}
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		value := vars[name]
		path := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		if key, ok := EnvVars[name]; ok {
			if err := c.Set(key, value); err != nil {
				return fmt.Errorf("%w (from %s)", err, name)
			}
			continue
		}
		t, ok := settingType(reflect.TypeOf(*c), path)
		if !ok {
			if len(path) > 1 {
				return fmt.Errorf("%w: %s names no setting (%s)", ErrConfig, name, strings.Join(path, "."))
			}
			continue
		}
		var leaf *yaml.Node
		if t.Kind() == reflect.String {
			leaf = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
		} else {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(value), &doc); err != nil || len(doc.Content) != 1 {
				return fmt.Errorf("%w: %s: not a YAML value: %v", ErrConfig, name, err)
			}
			leaf = doc.Content[0]
		}
		root := leaf
		for i := len(path) - 1; i >= 0; i-- {
			root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map",
				Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: path[i]}, root}}
		}
		// Through the file's decoder, so that a misspelt key inside the
		// value is refused as in the file.
		doc, err := yaml.Marshal(root)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(doc))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
		}
	}
	return nil
}

// settingType follows path through the YAML keys of t's sections and
// returns the type of the setting it names.
func settingType(t reflect.Type, path []string) (reflect.Type, bool) {
	for i, key := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || isLeafStruct(t) {
			return nil, false
		}
		f, ok := fieldByKey(t, key)
		if !ok {
			return nil, false
		}
		t = f.Type
		if i == len(path)-1 {
			return t, true
		}
	}
	return nil, false
}

// isLeafStruct reports whether t, a struct, is set as one value from
// YAML (it decodes itself) rather than key by key.
func isLeafStruct(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) && t != reflect.TypeFor[MinTrustLevel]()
}

// fieldByKey is the field of struct t whose YAML key is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if k := yamlKey(f); k != "" && k == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKey is f's YAML key ("" when not in the YAML).
func yamlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" || k == "" {
		return ""
	}
	return k
}
