module github.com/metaclaw/metaclaw

go 1.26.8

require (
	github.com/davidbyttow/govips/v2 v2.19.0 // images: libvips through cgo (files.image.*)
	github.com/dop251/goja v0.0.0-20260917113740-793a2a65c13b // the JS sandbox: pure-Go VM, one per run
	github.com/duckdb/duckdb-go/v2 v2.10505.0 // files.table.*: CSV/xlsx as SQL (embedded DuckDB 1.5.5)
	github.com/gabriel-vasile/mimetype v1.4.16 // MIME type from magic bytes
	github.com/go-pdf/fpdf v0.9.0 // markdown → PDF with selectable text (POST …/convert)
	github.com/google/uuid v1.6.0 // file ids
	github.com/gorilla/mux v1.8.1 // HTTP routes
	github.com/klauspost/compress v1.20.3 // fast deflate for saving edited workbooks (6× compress/flate at a like ratio)
	github.com/klippa-app/go-pdfium v1.19.3 // PDF text in reading order: pdfium as WebAssembly on wazero
	github.com/mattn/go-sqlite3 v1.14.53 // metadata store (cgo)
	github.com/modelcontextprotocol/go-sdk v1.8.0 // MCP over stdio and streamable HTTP
	github.com/nats-io/nats-server/v2 v2.15.2 // scale-out: JetStream embedded by `serve --nats embedded` and by the natsstore tests (issue 15)
	github.com/nats-io/nats.go v1.55.0 // scale-out: the shared store's client (object store, KV, streams) for several hosts (issue 15)
	github.com/pdfcpu/pdfcpu v0.15.0 // PDF editing: pages, merge, split, forms
	github.com/richardlehane/mscfb v1.0.7 // detects encrypted (OLE-wrapped) workbooks
	github.com/saintfish/chardet v0.0.0-20230101081208-5e3ef4b5456d // charset detection of CSV files
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // validates every call against its op's JSON Schema
	github.com/schollz/progressbar/v3 v3.19.1 // CLI progress bars
	github.com/spf13/cobra v1.10.2 // CLI commands: per-command --help with examples, "did you mean" for commands, interspersed flags, shell completion (kubectl's and gh's library; kong would also do, cobra+pflag is the common idiom)
	github.com/spf13/pflag v1.0.10 // GNU-style flags for cobra; the config package binds every setting to one
	github.com/tetratelabs/wazero v1.12.0 // WebAssembly runtime (pdfium)
	github.com/xuri/excelize/v2 v2.11.0 // xlsx read/write (v2.11.1 does not resolve here)
	github.com/yuin/goldmark v1.8.7 // markdown parsing for conversion
	go.yaml.in/yaml/v3 v3.0.5 // the metaclaw.yaml config file (the YAML project's maintained yaml.v3, with line numbers for errors)
	golang.org/x/image v0.44.0 // TrueType subsetting for PDF text; independent WebP/TIFF readers in tests
	golang.org/x/sync v0.24.0 // singleflight for shared caches
	golang.org/x/term v0.47.0 // terminal detection for progress bars
	golang.org/x/text v0.43.0 // charset transcoding (Windows-1252, UTF-16)
)

require (
	github.com/apache/arrow-go/v18 v18.5.1 // indirect
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/dlclark/regexp2/v2 v2.5.2 // indirect
	github.com/duckdb/duckdb-go-bindings v0.10505.0 // indirect
	github.com/duckdb/duckdb-go-bindings/lib/darwin-amd64 v0.10505.0 // indirect
	github.com/duckdb/duckdb-go-bindings/lib/darwin-arm64 v0.10505.0 // indirect
	github.com/duckdb/duckdb-go-bindings/lib/linux-amd64 v0.10505.0 // indirect
	github.com/duckdb/duckdb-go-bindings/lib/linux-arm64 v0.10505.0 // indirect
	github.com/duckdb/duckdb-go-bindings/lib/windows-amd64 v0.10505.0 // indirect
	github.com/go-sourcemap/sourcemap v2.1.3+incompatible // indirect
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/google/flatbuffers v25.12.19+incompatible // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/google/pprof v0.0.0-20260402051712-545e8a4df936 // indirect
	github.com/hhrutter/tiff v1.0.6 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jolestar/go-commons-pool/v2 v2.1.2 // indirect
	github.com/klauspost/cpuid/v2 v2.3.0 // indirect
	github.com/mattn/go-runewidth v0.0.31 // indirect; pdfcpu asks for v0.0.27, whose init builds Unicode width tables (~30 ms CPU and 2.5 MB at every process start); v0.0.31 builds them lazily
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/pierrec/lz4/v4 v4.1.25 // indirect
	github.com/richardlehane/msoleps v1.0.6 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/tiendc/go-deepcopy v1.7.2 // indirect
	github.com/xuri/efp v0.0.1 // indirect
	github.com/xuri/nfp v0.0.2-0.20250530014748-2ddeb826f9a9 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/exp v0.0.0-20260112195511-716be5621a96 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20260924152758-ed294f943157 // indirect
	golang.org/x/time v0.16.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da // indirect
)

require (
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
)
