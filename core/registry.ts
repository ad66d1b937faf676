import type { GatewayConfig } from '../config/types.js';
import type { OperationId } from './operations.js';
import type {
  CandidateTarget,
  CatalogModel,
  ModelCatalogView,
  ProviderInstance,
  ProviderRegistryView,
  ProviderType,
} from './plugin.js';

/** Provider instances by id, in the order of `providers:`. */
export class ProviderRegistry implements ProviderRegistryView {
  private readonly byId = new Map<string, ProviderInstance>();

  add(instance: ProviderInstance): void {
    this.byId.set(instance.id, instance);
  }

  get(id: string): ProviderInstance | undefined {
    return this.byId.get(id);
  }

  list(): readonly ProviderInstance[] {
    return [...this.byId.values()];
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled(this.list().map((p) => p.close?.()));
  }
}

/** Provider types by name, as plugins registered them. */
export class ProviderTypeRegistry {
  private readonly types = new Map<string, { definition: ProviderType; plugin: string }>();

  register(definition: ProviderType, plugin: string): void {
    const existing = this.types.get(definition.type);
    if (existing) throw new Error(`provider type '${definition.type}' is already registered by plugin '${existing.plugin}'`);
    this.types.set(definition.type, { definition, plugin });
  }

  get(type: string): ProviderType | undefined {
    return this.types.get(type)?.definition;
  }

  has(type: string): boolean {
    return this.types.has(type);
  }

  names(): string[] {
    return [...this.types.keys()];
  }
}

interface TargetSpec {
  providerId: string;
  model: string;
  weight: number;
  priority: number;
}

/**
 * Public model names and the back ends behind them. A name from `models:` is an alias with its
 * own targets; a model a provider lists is routable under its own name.
 */
export class ModelCatalog implements ModelCatalogView {
  private readonly specs = new Map<string, TargetSpec[]>();
  private readonly owners = new Map<string, string>();
  private readonly fallbackNames = new Map<string, string[]>();
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(
    private readonly config: Pick<GatewayConfig, 'models'>,
    private readonly providers: ProviderRegistryView,
  ) {}

  /** Build the name table from `models:` and the providers' own model lists. Run once providers exist. */
  index(): void {
    this.specs.clear();
    this.owners.clear();
    this.fallbackNames.clear();
    for (const alias of this.config.models) {
      this.specs.set(
        alias.name,
        alias.targets.map((t) => ({ providerId: t.provider, model: t.model ?? alias.name, weight: t.weight ?? 1, priority: t.priority ?? 0 })),
      );
      this.owners.set(alias.name, 'switchyard');
      if (alias.fallbacks?.length) this.fallbackNames.set(alias.name, alias.fallbacks);
    }
    for (const provider of this.providers.list()) {
      for (const model of provider.models) {
        if (this.owners.get(model) === 'switchyard') continue; // an alias shadows a provider's own name
        const list = this.specs.get(model) ?? [];
        list.push({ providerId: provider.id, model, weight: 1, priority: 0 });
        this.specs.set(model, list);
        if (!this.owners.has(model)) this.owners.set(model, provider.id);
      }
    }
  }

  list(): readonly CatalogModel[] {
    return [...this.owners.entries()].map(([id, ownedBy]) => ({ id, ownedBy, created: this.created }));
  }

  has(model: string): boolean {
    return this.specs.has(model);
  }

  candidates(model: string, operation: OperationId): readonly CandidateTarget[] {
    const specs = this.specs.get(model);
    if (!specs) return [];
    const out: CandidateTarget[] = [];
    for (const spec of specs) {
      const provider = this.providers.get(spec.providerId);
      if (!provider || !provider.operations[operation]) continue;
      out.push({ provider, model: spec.model, weight: spec.weight, priority: spec.priority });
    }
    return out;
  }

  fallbacks(model: string): readonly string[] {
    return this.fallbackNames.get(model) ?? [];
  }
}
