package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/bindings/ts"
)

func newTypesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "types",
		Short: "print the TypeScript declarations of the sandbox API",
		Long: `Print the TypeScript declarations of files.*, tools.*, input and session, for an
editor or for type-checking a script before it runs. Needs no data directory.`,
		Example: `  metaclaw types > metaclaw.d.ts
  npx tsc --noEmit --strict metaclaw.d.ts script.ts`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The declarations come from the registry alone: a throwaway
			// directory holds the host while they are written.
			h, cleanup, err := g.openRegistry(false)
			if err != nil {
				return fail(g, err, false)
			}
			defer cleanup()
			fmt.Fprint(stdout, ts.Declarations(h.Registry))
			return nil
		},
	}
}
