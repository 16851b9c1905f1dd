// A question's branches: "◀ Branch 2/3 ▶" above it (app/ui/question_branches.py sends the props). Chainlit's page
// draws no buttons on a user's message; this element is drawn with the question, and an arrow calls its action.
// After a click both arrows wait for the redrawn props, or for the action's answer when the switch was refused: a
// second click would start a switch while the first one still shows its branch (the server refuses it, issue 32).
import { useEffect, useState } from 'react';
import { Button } from '@/components/ui/button';

export default function BranchArrows() {
  const [waiting, setWaiting] = useState(false);
  useEffect(() => setWaiting(false), [props.place, props.previous?.index, props.next?.index]);
  const go = (arrow) => {
    setWaiting(true);
    Promise.resolve(callAction({ name: arrow.name, payload: { index: arrow.index }, forId: props.forId }))
      .finally(() => setWaiting(false));
  };
  const button = (arrow, label) =>
    arrow ? (
      <Button variant="ghost" size="sm" className="h-6 px-2 text-muted-foreground" title={arrow.tooltip}
              aria-label={arrow.tooltip} disabled={waiting} onClick={() => go(arrow)}>
        {label}
      </Button>
    ) : null;
  return (
    <div className="branch-arrows flex items-center justify-end gap-1 text-sm text-muted-foreground">
      {button(props.previous, '◀')}
      <span className="branch-place">{props.place}</span>
      {button(props.next, '▶')}
    </div>
  );
}
