package mcpproxy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Templates (summary, resource) replace {tool} with the tool's name and
// {args.NAME} with the argument NAME (a string as is, any other value as
// compact JSON, "" when absent). No other use of '{' or '}' is allowed.

const maxTemplate = 1000

func checkTemplate(t string) error {
	if len(t) > maxTemplate {
		return fmt.Errorf("longer than %d bytes", maxTemplate)
	}
	_, err := expand(t, "", nil)
	return err
}

func expand(t, tool string, args map[string]any) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexAny(t, "{}")
		if i < 0 {
			b.WriteString(t)
			return b.String(), nil
		}
		if t[i] == '}' {
			return "", fmt.Errorf("unmatched } in %q", t)
		}
		b.WriteString(t[:i])
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed { in %q", t)
		}
		name := t[i+1 : i+j]
		switch {
		case name == "tool":
			b.WriteString(tool)
		case strings.HasPrefix(name, "args.") && len(name) > len("args.") && !strings.ContainsAny(name, "{"):
			switch v := args[name[len("args."):]].(type) {
			case nil:
			case string:
				b.WriteString(v)
			default:
				j, _ := json.Marshal(v)
				b.WriteString(string(j))
			}
		default:
			return "", fmt.Errorf("unknown placeholder {%s} (use {tool} or {args.NAME})", name)
		}
		t = t[i+j+1:]
	}
}
