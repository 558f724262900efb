package spreadsheet

import (
	"errors"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// excelize's zip limits: the whole workbook may inflate to 1 GB; parts
// larger than 16 MB are spooled to temp files instead of memory. A zip
// bomb is refused before it is inflated.
const (
	excelUnzipLimit    = 1 << 30
	excelUnzipXMLLimit = 16 << 20
)

func excelOptions() excelize.Options {
	return excelize.Options{UnzipSizeLimit: excelUnzipLimit, UnzipXMLSizeLimit: excelUnzipXMLLimit}
}

// openExcel opens a workbook with excelize under the zip limits.
func openExcel(p string) (*excelize.File, error) {
	f, err := excelize.OpenFile(p, excelOptions())
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, excelError(err)
	}
	// The store names bodies without an extension; excelize would refuse to
	// write and would otherwise rewrite the content type from the name. The
	// workbook keeps the content type it came with.
	f.Path = ""
	return f, nil
}

// coded reports whether err already carries a code, so that it is passed
// on unchanged.
func coded(err error) bool {
	var ae *apierr.Error
	return errors.As(err, &ae)
}

// excelError maps excelize errors to coded ones.
func excelError(err error) error {
	if err == nil || coded(err) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unzip size exceeds"):
		return apierr.Wrap(apierr.TooLarge, err, "the workbook inflates to more than %d MB, the most an edit may load (a zip bomb or an extremely large workbook)", excelUnzipLimit>>20)
	case errors.Is(err, excelize.ErrWorkbookFileFormat), errors.Is(err, excelize.ErrWorkbookPassword):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "the file is not an xlsx workbook excelize can open (%v)", err)
	case strings.Contains(msg, "zip:"), strings.Contains(msg, "XML syntax"), strings.Contains(msg, "flate"), strings.Contains(msg, "unexpected EOF"):
		return readFailed(err, "the workbook is damaged")
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "the workbook could not be processed: %v", err)
}

// calcValue computes one formula cell with excelize's engine; a formula
// the engine fails on reads as #VALUE!.
func calcValue(f *excelize.File, sheet, ref string, dk dateKind, date1904 bool) (v value) {
	defer func() {
		if recover() != nil {
			v = value{k: kError, s: "#VALUE!"}
		}
	}()
	res, err := f.CalcCellValue(sheet, ref, excelize.Options{RawCellValue: true})
	if err != nil {
		if strings.HasPrefix(res, "#") {
			return value{k: kError, s: res}
		}
		return value{k: kError, s: "#VALUE!"}
	}
	return typedCalc(res, dk, date1904)
}
