package alerts

// Carry takes over old's pending and firing alerts for each rule e has unchanged (the same
// name, selector, function, comparison, threshold, for, severity and summary; the built-in
// rules by their settings alike): a configuration reload that changes one rule, or adds one,
// does not send the others' firing alerts back to pending. A changed rule starts afresh.
//
// Call it before e's first Eval, from the goroutine that evaluates old (it reads old's state),
// so that no Eval of old runs meanwhile.
func (e *Engine) Carry(old *Engine) {
	if old == nil {
		return
	}
	for j, nr := range e.rules {
		for i, or := range old.rules {
			if !sameRule(nr, or) {
				continue
			}
			for k, in := range old.insts {
				if k.rule == i {
					c := *in
					e.insts[instKey{j, k.key}] = &c
				}
			}
			break
		}
	}
}

func sameRule(a, b *rule) bool {
	x, y := a.Rule, b.Rule
	return a.kind == b.kind && x.Name == y.Name && x.Fn == y.Fn && x.Op == y.Op && x.Threshold == y.Threshold &&
		x.For == y.For && x.Severity == y.Severity && x.Summary == y.Summary &&
		(x.Selector == nil) == (y.Selector == nil) && (x.Selector == nil || x.Selector.String() == y.Selector.String())
}
