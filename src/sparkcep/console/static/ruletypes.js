/* The rule types and what the editor shows for each (a template, the required fields, help per field), as
 * GET /api/rule-types serves them from the server's registry: the page keeps no table of its own, so a rule
 * type added on the server gets its template button and its hints with no change here.
 */
import {$, h} from './dom.js';
import {api, showFailure} from './http.js';

let types = [];
let commonHelp = {};

/** Ask the server for the rule types and put a template button per type before the editor's Clear button. */
export async function loadRuleTypes(pick) {
  let answer;
  try {
    answer = await api('GET', '/api/rule-types');
  } catch (error) {
    showFailure('rule types (no templates or field help)', error);
    return;
  }
  types = Array.isArray(answer && answer.types) ? answer.types : [];
  commonHelp = (answer && answer.help) || {};
  const buttons = types.filter((type) => type.template).map((type) => h('button', {
    type: 'button', dataset: {template: type.name}, testid: `template-${type.name}`,
    onclick: () => pick(type.template),
  }, `${type.name.charAt(0).toUpperCase()}${type.name.slice(1)} template`));
  $('#editor-clear').before(...buttons);
}

function typeOf(draft) {
  return draft && typeof draft === 'object' ? types.find((type) => type.name === draft.type) : undefined;
}

/** The top-level fields a draft of its type must have (none while its type is unknown). */
export function requiredFields(draft) {
  const type = typeOf(draft);
  if (!type) return [];
  // e.g. a pattern written as MATCH_RECOGNIZE ("sql") derives key and pattern from its query
  for (const [field, required] of Object.entries(type.required_with || {})) if (draft[field]) return required;
  return type.required || [];
}

/** What ``field`` means: in the draft's type's words when it has them, else as any type words it. */
export function fieldHelp(field, draft) {
  const type = typeOf(draft);
  if (type && type.help && field in type.help) return type.help[field];
  if (field in commonHelp) return commonHelp[field];
  for (const each of [...types].reverse()) if (each.help && field in each.help) return each.help[field];
  return '';
}
