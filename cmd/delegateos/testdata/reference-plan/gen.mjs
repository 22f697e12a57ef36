// Produces a decomposition plan with the DelegateOS reference implementation's own
// code (newtro/delegateos, dist/core/decomposition.js at commit 8cc9e49), for
// cmd/delegateos/testdata/script/decompose.txtar: node gen.mjs > plan.json
import { decompose, validatePlan, SequentialStrategy } from './decomposition.js';

const parent = {
  id: 'ct_a00000000001',
  constraints: { maxBudgetMicrocents: 100000, deadline: '2099-01-01T00:00:00.000Z', requiredCapabilities: ['docs'] },
};
const plan = decompose(parent, new SequentialStrategy([
  { title: 'Gather', description: 'Read the sources', budgetFraction: 0.3,
    capabilities: [{ namespace: 'docs', action: 'read', resource: '/project/sources/**' }] },
  { title: 'Draft', description: 'Write the draft', budgetFraction: 0.3,
    capabilities: [{ namespace: 'docs', action: 'read', resource: '/project/drafts/**' }] },
  { title: 'Review', description: 'Check the draft', budgetFraction: 0.2,
    capabilities: [{ namespace: 'docs', action: 'read', resource: '/project/drafts/**' }] },
]));
const valid = validatePlan(plan, parent);
if (!valid.ok) throw valid.error;
console.log(JSON.stringify(plan, null, 2));
