package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "print the effective configuration and where each value came from",
		Long: `Print every setting with its value and where it came from: default, file (which file
and line), env (which variable) or flag. Precedence: flag > env > file > default. The
config file is --config FILE (or METACLAW_CONFIG), else metaclaw.yaml in the data
directory when it exists. Every setting KEY is also the flag --KEY (dashes for
underscores) and the variable METACLAW_KEY. Secrets are masked. Needs no data directory.`,
		Example: `  metaclaw config
  metaclaw config --json
  METACLAW_RUN_TIMEOUT=1m metaclaw config --config ./metaclaw.yaml --max-runs 16`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			vals := g.cfg.Values()
			if g.json {
				out := map[string]any{}
				for _, v := range vals {
					out[v.Key] = map[string]any{"value": jsonValue(v), "source": v.Source, "origin": v.Origin,
						"env": v.EnvName(), "flag": "--" + v.FlagName()}
				}
				printJSON(map[string]any{"file": g.cfg.File, "settings": out})
				return nil
			}
			if g.cfg.File != "" {
				fmt.Fprintf(stdout, "# config file: %s\n", g.cfg.File)
			} else {
				fmt.Fprintf(stdout, "# no config file (--config FILE, METACLAW_CONFIG or %s/%s)\n", g.data, config.DataFileName)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tENV")
			for _, v := range vals {
				src := string(v.Source)
				if v.Origin != "" {
					src += " " + v.Origin
				}
				text := v.Text()
				if text == "" {
					text = `""`
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Key, text, src, v.EnvName())
			}
			return tw.Flush()
		},
	}
	config.Bind(cmd.Flags(), "config")
	return cmd
}

// jsonValue is a value as --json prints it: sizes and counts as numbers,
// durations and secrets as text.
func jsonValue(v *config.Value) any {
	if v.Secret {
		return v.Text()
	}
	switch v.Kind {
	case config.Duration:
		return v.Text()
	case config.List:
		if v.Value == nil {
			return []string{}
		}
	case config.SizeMap:
		if v.Value == nil {
			return map[string]int64{}
		}
	}
	return v.Value
}
