// Package config is metaclaw's configuration: one table of settings
// (settings.go), each readable from a YAML config file, a METACLAW_*
// environment variable and a command-line flag, with the precedence
// flag > environment > file > default. Every value remembers where it came
// from, so that `metaclaw config` can say why a value is what it is.
//
// The config file is --config FILE (or METACLAW_CONFIG), else metaclaw.yaml
// in the data directory when it exists. Unknown keys and malformed values
// are errors that name the file and line, the variable or the flag, and say
// what would be accepted.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Source says where a value came from.
type Source string

const (
	FromDefault Source = "default"
	FromFile    Source = "file"
	FromEnv     Source = "env"
	FromFlag    Source = "flag"
)

// DataFileName is the config file looked for in the data directory.
const DataFileName = "metaclaw.yaml"

// ConfigFlag is the flag (and METACLAW_CONFIG the variable) naming the
// config file.
const ConfigFlag = "config"

// Value is one setting's effective value.
type Value struct {
	*Setting
	Value  any // string, bool, int64 (Int, Size), time.Duration, []string
	Source Source
	// Origin says exactly where: the file and line, the variable, the flag.
	Origin string
}

// Text is the value as a user would write it; secrets are masked.
func (v *Value) Text() string {
	t := format(v.Setting, v.Value)
	if v.Secret && t != "" {
		return mask(v.Value)
	}
	if v.Key == "nats" {
		return redactURLs(t)
	}
	return t
}

// redactURLs hides the passwords and tokens that NATS URLs may carry
// (nats://user:secret@host:4222, nats://token@host).
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		who := "****" // a token
		if _, has := u.User.Password(); has {
			who = u.User.Username() + ":****"
		}
		u.User = nil
		scheme, rest, _ := strings.Cut(u.String(), "://")
		parts[i] = scheme + "://" + who + "@" + rest
	}
	return strings.Join(parts, ",")
}

// mask hides secrets but keeps what helps to recognise a setting: the
// workspace of each SECRET:WORKSPACE token.
func mask(v any) string {
	one := func(s string) string {
		if _, ws, ok := strings.Cut(s, ":"); ok {
			return "****:" + ws
		}
		return "****"
	}
	if l, ok := v.([]string); ok {
		out := make([]string, len(l))
		for i, s := range l {
			out[i] = one(s)
		}
		return strings.Join(out, ",")
	}
	return one(fmt.Sprint(v))
}

// Config is the effective configuration.
type Config struct {
	// File is the config file that was read, "" when none.
	File   string
	values map[string]*Value
}

// Options say where Load looks.
type Options struct {
	// Flags are the command's parsed flags (Bind registered the settings'
	// flags on them); nil means no flags.
	Flags *pflag.FlagSet
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// BindGlobal registers --config and the flags of the settings every
// command takes (--data, --workspace) on fs, the root's persistent flags.
func BindGlobal(fs *pflag.FlagSet) {
	fs.String(ConfigFlag, "", "config file (env METACLAW_CONFIG; default: DATA/metaclaw.yaml when it exists)")
	bind(fs, func(s *Setting) bool { return s.Global() })
}

// Bind registers on fs the flags of the settings that command takes.
// Flags keep the text they are given; Load parses and checks it, so that a
// bad value is reported the same way from every source.
func Bind(fs *pflag.FlagSet, command string) {
	bind(fs, func(s *Setting) bool { return s.Takes(command) })
}

func bind(fs *pflag.FlagSet, want func(*Setting) bool) {
	for _, s := range Settings {
		if !want(s) || fs.Lookup(s.FlagName()) != nil {
			continue
		}
		f := fs.VarPF(&flagValue{s: s}, s.FlagName(), "", flagUsage(s))
		if s.Kind == Bool {
			f.NoOptDefVal = "true"
		}
	}
}

func flagUsage(s *Setting) string {
	u := s.Doc + " (env " + s.EnvName()
	switch {
	case s.Default == "" || s.Kind == Bool:
	case s.Kind == String:
		u += ", default " + strconv.Quote(s.Default)
	default:
		u += ", default " + s.Default
	}
	return u + ")"
}

// flagValue holds a setting's flag text until Load parses it.
type flagValue struct {
	s    *Setting
	vals []string
}

func (f *flagValue) String() string { return strings.Join(f.vals, ",") }
func (f *flagValue) Type() string {
	switch f.s.Kind {
	case List:
		return "strings"
	case SizeMap:
		return "name=size"
	case Enum:
		return strings.Join(f.s.Enum, "|")
	case Bool:
		return "bool"
	}
	return f.s.Kind.String()
}
func (f *flagValue) Set(v string) error {
	if f.s.Kind == List || f.s.Kind == SizeMap {
		f.vals = append(f.vals, v)
	} else {
		f.vals = []string{v}
	}
	return nil
}

// Load builds the effective configuration from defaults, the config file,
// the environment and o.Flags, in that order of precedence.
func Load(o Options) (*Config, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{values: map[string]*Value{}}
	// Defaults first.
	for _, s := range Settings {
		v := &Value{Setting: s, Source: FromDefault}
		if s.Default != "" || s.Kind == List || s.Kind == SizeMap {
			p, err := parse(s, s.Default)
			if err != nil {
				panic("config: default of " + s.Key + ": " + err.Error())
			}
			v.Value = p
		} else {
			v.Value = ""
		}
		c.values[s.Key] = v
	}
	flagText := func(s *Setting) (string, bool) {
		if o.Flags == nil {
			return "", false
		}
		f := o.Flags.Lookup(s.FlagName())
		if f == nil || !f.Changed {
			return "", false
		}
		fv, ok := f.Value.(*flagValue)
		if !ok || fv.s != s {
			return "", false
		}
		return fv.String(), true
	}

	// The file: --config, METACLAW_CONFIG, else the data directory's.
	path, explicit := "", false
	if o.Flags != nil {
		if f := o.Flags.Lookup(ConfigFlag); f != nil && f.Changed {
			path, explicit = f.Value.String(), true
		}
	}
	if path == "" {
		if path = getenv("METACLAW_CONFIG"); path != "" {
			explicit = true
		}
	}
	if path == "" {
		// Where is the data directory, before any file is read?
		data := Lookup("data")
		dir := data.Default
		if e := getenv(data.EnvName()); e != "" {
			dir = e
		}
		if t, ok := flagText(data); ok {
			dir = t
		}
		path = filepath.Join(dir, DataFileName)
	}
	if err := c.readFile(path, explicit); err != nil {
		return nil, err
	}

	// Then the environment and the flags.
	for _, s := range Settings {
		if e := getenv(s.EnvName()); e != "" {
			if err := c.set(s, e, FromEnv, s.EnvName()); err != nil {
				return nil, err
			}
		}
		if t, ok := flagText(s); ok {
			if err := c.set(s, t, FromFlag, "--"+s.FlagName()); err != nil {
				return nil, err
			}
		}
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) set(s *Setting, text string, src Source, origin string) error {
	v, err := parse(s, text)
	if err != nil {
		return fmt.Errorf("%s: %v", describe(src, origin, s), err)
	}
	c.values[s.Key] = &Value{Setting: s, Value: v, Source: src, Origin: origin}
	return nil
}

// describe names where a value came from in an error message.
func describe(src Source, origin string, s *Setting) string {
	switch src {
	case FromFile:
		return "config file " + origin + ": " + s.Key
	case FromEnv:
		return "environment variable " + origin
	case FromFlag:
		return "flag " + origin
	}
	return s.Key
}

// readFile reads the YAML config file at path. A missing file is an error
// only when it was named explicitly.
func (c *Config) readFile(path string, explicit bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("config file: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("config file %s: not valid YAML: %v", path, err)
	}
	c.File = path
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: the file must be a mapping of settings, e.g. \"max_file_size: 50MB\"", path, root.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		s := Lookup(k.Value)
		if s == nil {
			msg := fmt.Sprintf("config file %s: unknown setting %q", where, k.Value)
			if near := Nearest(k.Value, Keys()); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			return errors.New(msg + " (`metaclaw config` lists the settings)")
		}
		if line, dup := seen[s.Key]; dup {
			return fmt.Errorf("config file %s: %s is set twice (also on line %d)", where, s.Key, line)
		}
		seen[s.Key] = k.Line
		if s.NotInDataFile && !explicit {
			return fmt.Errorf("config file %s: %s cannot be set in the data directory's own %s; use --%s, %s or --config FILE",
				where, s.Key, DataFileName, s.FlagName(), s.EnvName())
		}
		if v.Tag == "!!null" {
			continue // "key:" with no value leaves the default
		}
		text, err := scalarText(s, v)
		if err != nil {
			return fmt.Errorf("config file %s: %s: %v", where, s.Key, err)
		}
		if err := c.set(s, text, FromFile, where); err != nil {
			return err
		}
	}
	return nil
}

// scalarText turns a YAML value into the text form parse reads: a list may
// be a sequence or one comma-separated string.
func scalarText(s *Setting, v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.MappingNode:
		if s.Kind != SizeMap {
			break
		}
		// {team: 5GB, guests: 100MB}
		var parts []string
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			if k.Kind != yaml.ScalarNode || val.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: each entry must be NAME: SIZE", k.Line)
			}
			if strings.ContainsAny(k.Value, ",=") {
				return "", fmt.Errorf("line %d: the name %q may not contain a comma or =", k.Line, k.Value)
			}
			parts = append(parts, k.Value+"="+val.Value)
		}
		return strings.Join(parts, ","), nil
	case yaml.SequenceNode:
		if s.Kind != List && s.Kind != SizeMap {
			return "", fmt.Errorf("expected one value (%s), got a list", kindExample(s.Kind, s))
		}
		var parts []string
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: list items must be plain values", item.Line)
			}
			if strings.Contains(item.Value, ",") {
				return "", fmt.Errorf("line %d: an item may not contain a comma", item.Line)
			}
			parts = append(parts, item.Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("expected %s, got a mapping", kindExample(s.Kind, s))
}

// SizeMap returns a SizeMap setting (nil when empty).
func (c *Config) SizeMap(key string) map[string]int64 {
	m, _ := c.Get(key).Value.(map[string]int64)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// check validates what no single value can: limits that contradict each
// other, addresses and URLs.
func (c *Config) check() error {
	pair := func(def, max string) error {
		d, m := c.values[def], c.values[max]
		if less(m.Value, d.Value) {
			return fmt.Errorf("%s (%s, from %s) is larger than %s (%s, from %s); raise %s or lower %s",
				def, d.Text(), d.where(), max, m.Text(), m.where(), max, def)
		}
		return nil
	}
	for _, p := range [][2]string{{"run_timeout", "run_timeout_max"}, {"run_memory", "run_memory_max"}, {"max_file_size", "max_workspace_size"}} {
		if err := pair(p[0], p[1]); err != nil {
			return err
		}
	}
	if a := c.String("addr"); a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			v := c.values["addr"]
			return fmt.Errorf("addr %q (from %s) is not host:port, e.g. 127.0.0.1:8080 or :8080", a, v.where())
		}
	}
	// server is checked where it is used, as a coded error like any
	// other failure to reach the server.
	for _, k := range []string{"public_url"} {
		if u := c.String(k); u != "" {
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return fmt.Errorf("%s %q (from %s) is not an http(s) URL, e.g. https://files.example.com", k, u, c.values[k].where())
			}
		}
	}
	if n := strings.TrimSpace(c.String("nats")); n != "" && !strings.EqualFold(n, "embedded") {
		for _, part := range strings.Split(n, ",") {
			part = strings.TrimSpace(part)
			p, err := url.Parse(part)
			if err != nil || p.Host == "" || !natsSchemes[p.Scheme] {
				return fmt.Errorf("nats %q (from %s) is not a NATS URL such as nats://host:4222 (several comma-separated), or embedded",
					redactURLs(part), c.values["nats"].where())
			}
		}
	}
	if a := c.String("nats_listen"); a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("nats_listen %q (from %s) is not host:port, e.g. 127.0.0.1:4222 or 0.0.0.0:4222", a, c.values["nats_listen"].where())
		}
	}
	if c.String("nats_password") != "" && c.String("nats_user") == "" {
		return fmt.Errorf("nats_password (from %s) needs nats_user", c.values["nats_password"].where())
	}
	if d := c.String("data"); d == "" {
		return errors.New("data: the data directory may not be empty")
	}
	return nil
}

// natsSchemes are the URL schemes the NATS client connects with.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

func less(a, b any) bool {
	switch x := a.(type) {
	case int64:
		return x < b.(int64)
	case time.Duration:
		return x < b.(time.Duration)
	}
	return false
}

// where says in a sentence where v came from.
func (v *Value) where() string {
	if v.Source == FromDefault {
		return "the default"
	}
	return v.Origin
}

// Keys lists every setting's key.
func Keys() []string {
	out := make([]string, len(Settings))
	for i, s := range Settings {
		out[i] = s.Key
	}
	return out
}

// Values lists the effective values in the table's order.
func (c *Config) Values() []*Value {
	out := make([]*Value, 0, len(Settings))
	for _, s := range Settings {
		out = append(out, c.values[s.Key])
	}
	return out
}

// Get returns the value of key; an unknown key is a programming error.
func (c *Config) Get(key string) *Value {
	v, ok := c.values[key]
	if !ok {
		panic("config: no setting " + key)
	}
	return v
}

func (c *Config) String(key string) string {
	s, _ := c.Get(key).Value.(string)
	return s
}

func (c *Config) Bool(key string) bool {
	b, _ := c.Get(key).Value.(bool)
	return b
}

// Int returns an Int or Size setting.
func (c *Config) Int(key string) int64 {
	n, _ := c.Get(key).Value.(int64)
	return n
}

func (c *Config) Duration(key string) time.Duration {
	d, _ := c.Get(key).Value.(time.Duration)
	return d
}

func (c *Config) List(key string) []string {
	l, _ := c.Get(key).Value.([]string)
	return append([]string(nil), l...)
}

// Set overrides key as if a flag had set it (for flags kept for
// compatibility, such as --log-json).
func (c *Config) Set(key, text, origin string) error {
	s := Lookup(key)
	if s == nil {
		return fmt.Errorf("config: no setting %s", key)
	}
	return c.set(s, text, FromFlag, origin)
}

// EnvNames lists every variable the configuration reads, sorted.
func EnvNames() []string {
	out := []string{"METACLAW_CONFIG"}
	for _, s := range Settings {
		out = append(out, s.EnvName())
	}
	sort.Strings(out)
	return out
}
