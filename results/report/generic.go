package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// genericSection is a summary field the report has no section for, shown as a table (a list of objects),
// key-value pairs (an object) or a value.
type genericSection struct {
	Title   string
	Columns []string
	Rows    [][]string
	Pairs   []kv
	Value   string
}

// generic renders a summary field the report does not know.
func generic(key string, raw json.RawMessage) genericSection {
	sec := genericSection{Title: key}
	var list []map[string]json.RawMessage
	var rawList []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 && json.Unmarshal(raw, &rawList) == nil {
		cols := map[string]bool{}
		var order []string
		for _, item := range rawList {
			for _, k := range objectKeys(item) {
				if !cols[k] {
					cols[k] = true
					order = append(order, k)
				}
			}
		}
		sec.Columns = order
		for _, item := range list {
			row := make([]string, len(order))
			for i, k := range order {
				if v, ok := item[k]; ok {
					row[i] = compactJSON(v)
				}
			}
			sec.Rows = append(sec.Rows, row)
		}
		return sec
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, k := range objectKeys(raw) {
			sec.Pairs = append(sec.Pairs, kv{k, compactJSON(obj[k])})
		}
		return sec
	}
	sec.Value = compactJSON(raw)
	return sec
}

// objectKeys returns the keys of a JSON object in the order they are written.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
	}
	return keys
}

// compactJSON shows a JSON value briefly: strings unquoted, numbers rounded, the rest compacted.
func compactJSON(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(round3(f), 'f', -1, 64)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		out := buf.String()
		if len(out) > 400 {
			out = out[:400] + "…"
		}
		return out
	}
	return string(raw)
}
