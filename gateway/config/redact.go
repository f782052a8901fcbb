package config

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted replaces a secret in the output of Effective.
const Redacted = "REDACTED"

// Effective returns c as YAML with every secret redacted: the fields
// tagged secret:"true" (a string, or the values of a map), secret:"env"
// (the values of NAME=value entries) and secret:"url" (the password and
// the query of a URL). A secret given as a reference, env:NAME or
// file:PATH, is shown as it is: it names where the secret is, not the
// secret.
func (c Config) Effective() ([]byte, error) {
	n, err := effectiveNode(reflect.ValueOf(c), "")
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(n)
}

func effectiveNode(v reflect.Value, secret string) (*yaml.Node, error) {
	if secret != "" {
		v = redactValue(v, secret)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
		}
		return effectiveNode(v.Elem(), "")
	case reflect.Struct:
		if _, ok := v.Interface().(yaml.Marshaler); ok || isTextMarshaler(v) {
			break
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			key := yamlKey(f)
			if key == "" {
				continue
			}
			child, err := effectiveNode(v.Field(i), f.Tag.Get("secret"))
			if err != nil {
				return nil, err
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
		}
		return m, nil
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			break
		}
		s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := 0; i < v.Len(); i++ {
			child, err := effectiveNode(v.Index(i), "")
			if err != nil {
				return nil, err
			}
			s.Content = append(s.Content, child)
		}
		return s, nil
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.Struct {
			break
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			child, err := effectiveNode(v.MapIndex(k), "")
			if err != nil {
				return nil, err
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(k)}, child)
		}
		return m, nil
	}
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		if v.IsZero() { // an unset trust level, say
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
		}
		return nil, err
	}
	return n, nil
}

func isTextMarshaler(v reflect.Value) bool {
	type textMarshaler interface{ MarshalText() ([]byte, error) }
	_, ok := v.Interface().(textMarshaler)
	return ok
}

// redactValue returns a copy of v, a field tagged secret, with the secret
// replaced.
func redactValue(v reflect.Value, how string) reflect.Value {
	switch {
	case v.Kind() == reflect.String:
		return reflect.ValueOf(redactString(v.String(), how)).Convert(v.Type())
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).SetString(redactString(v.Index(i).String(), how))
		}
		return out
	case v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.String:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			out.SetMapIndex(k, reflect.ValueOf(redactString(v.MapIndex(k).String(), how)).Convert(v.Type().Elem()))
		}
		return out
	}
	// A secret field of another type is a mistake of this package; the
	// test over every tagged field catches it. Never print it.
	return reflect.ValueOf(Redacted)
}

// redactString redacts one secret value as its tag says.
func redactString(s, how string) string {
	if s == "" {
		return ""
	}
	switch how {
	case "url":
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			if strings.Contains(s, "://") || strings.Contains(s, "@") {
				return Redacted
			}
			return s // a file path
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		}
		if u.RawQuery != "" {
			q := u.Query()
			for k := range q {
				q[k] = []string{Redacted}
			}
			u.RawQuery = q.Encode()
		}
		return u.String()
	case "env":
		name, _, ok := strings.Cut(s, "=")
		if !ok {
			return Redacted
		}
		return name + "=" + Redacted
	}
	if strings.HasPrefix(s, "env:") || strings.HasPrefix(s, "file:") {
		return s
	}
	return Redacted
}
