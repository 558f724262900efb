package pdf

import (
	_ "github.com/klippa-app/go-pdfium/requests"
	_ "github.com/klippa-app/go-pdfium/webassembly"
	_ "github.com/pdfcpu/pdfcpu/pkg/api"
	_ "github.com/pdfcpu/pdfcpu/pkg/pdfcpu/form"
	_ "github.com/tetratelabs/wazero"
	_ "golang.org/x/image/font/sfnt"
)
