package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
)

func newFsckCmd(g *globals) *cobra.Command {
	var repair bool
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "check (and repair) metadata against the file bodies on disk",
		Long: `Check that every file's metadata agrees with its body on disk (size, sha256) and find
orphaned bodies; --repair fixes what can be fixed. Exits 1 while problems remain.

With --nats (workspaces on NATS JetStream) it checks the shared deployment instead: that
every file's record has its body, and its backup, in the object store. It runs beside the
serving hosts; what crashed hosts leave behind is removed by the hosts themselves.`,
		Example: `  metaclaw fsck --data /srv/metaclaw
  metaclaw fsck --repair --json`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, _, err := g.openHost()
			if err != nil {
				return fail(g, err, g.json)
			}
			defer g.closeHost(h)
			rep, err := h.Store.Fsck(cmd.Context(), repair)
			if err != nil {
				return fail(g, err, g.json)
			}
			if g.json {
				printJSON(rep)
			} else {
				fmt.Fprintf(stdout, "checked %d files, %d problems", rep.FilesChecked, len(rep.Problems))
				if repair {
					fmt.Fprintf(stdout, ", %d repaired", len(rep.Problems)-rep.Unrepaired())
				}
				fmt.Fprintln(stdout)
				for _, p := range rep.Problems {
					state := ""
					if p.Repaired {
						state = " (repaired)"
					}
					where := p.Name
					if where == "" {
						where = p.Path
					}
					fmt.Fprintf(stdout, "  %-14s %s: %s%s\n", p.Kind, where, p.Detail, state)
				}
			}
			if rep.Unrepaired() > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "fix what can be fixed")
	config.Bind(cmd.Flags(), "fsck")
	return cmd
}
