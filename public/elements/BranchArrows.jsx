// A question's branches: "◀ Branch 2/3 ▶" above it (app/ui/question_branches.py sends the props). Chainlit's page
// draws no buttons on a user's message; this element is drawn with the question, and an arrow calls its action.
import { Button } from '@/components/ui/button';

export default function BranchArrows() {
  const go = (arrow) =>
    callAction({ name: arrow.name, payload: { index: arrow.index }, forId: props.forId });
  const button = (arrow, label) =>
    arrow ? (
      <Button variant="ghost" size="sm" className="h-6 px-2 text-muted-foreground" title={arrow.tooltip}
              aria-label={arrow.tooltip} onClick={() => go(arrow)}>
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
