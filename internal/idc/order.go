package idc

// OwnFirst returns a new slice with the items of own IDC first, then the others; order inside each part is kept (stable).
//
// Items whose IDC is "" are never own; with own == "" the result is a copy of
// items in their original order.
func OwnFirst[T any](items []T, idcOf func(T) string, own string) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if Same(idcOf(it), own) {
			out = append(out, it)
		}
	}
	for _, it := range items {
		if !Same(idcOf(it), own) {
			out = append(out, it)
		}
	}
	return out
}
